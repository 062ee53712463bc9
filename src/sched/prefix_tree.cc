#include "sched/prefix_tree.h"

#include <algorithm>
#include <cmath>

#include "common/check.h"
#include "common/strings.h"

namespace libra::sched {

// ---- StateTable --------------------------------------------------------------------------------

StateId StateTable::Intern(std::string_view tool_type, SizeClass size,
                           workload::ToolStatus status) {
  uint32_t tool;
  if (last_tool_ < tools_.size() && tools_[last_tool_] == tool_type) {
    tool = last_tool_;  // most calls name the tool the last one named
  } else if (auto it = index_.find(tool_type); it != index_.end()) {
    tool = it->second;
  } else {
    tool = static_cast<uint32_t>(tools_.size());
    tools_.emplace_back(tool_type);
    index_.emplace(std::string(tool_type), tool);
  }
  last_tool_ = tool;
  return tool * 9 + static_cast<uint32_t>(size) * 3 + static_cast<uint32_t>(status);
}

Result<StateId> StateTable::InternKey(std::string_view key) {
  LIBRA_ASSIGN_OR_RETURN(ToolState state, ToolState::FromKey(key));
  return Intern(state);
}

std::string StateTable::Key(StateId id) const {
  LIBRA_CHECK(id / 9 < tools_.size()) << "unknown state id " << id;
  return tools_[id / 9] + ":" + NameOf(static_cast<SizeClass>((id / 3) % 3)) + ":" +
         NameOf(static_cast<workload::ToolStatus>(id % 3));
}

// ---- Percentile --------------------------------------------------------------------------------

namespace {

/// numpy's linear interpolation at rank q * (n - 1), given the order statistics `at(i)`.
template <typename At>
double Interpolate(size_t n, double q, At at) {
  if (n == 0) return 0;
  const double index = q * static_cast<double>(n - 1);
  const size_t lo = static_cast<size_t>(std::floor(index));
  const double t = index - static_cast<double>(lo);
  const double a = at(lo);
  if (lo + 1 >= n) return a;
  const double b = at(lo + 1);
  // numpy's _lerp: symmetric form for t >= 0.5.
  const double diff = b - a;
  return t >= 0.5 ? b - diff * (1 - t) : a + diff * t;
}

}  // namespace

double Percentile(std::span<const double> values, double q, std::vector<double>& scratch) {
  scratch.assign(values.begin(), values.end());
  bool placed = false;
  return Interpolate(scratch.size(), q, [&](size_t i) {
    // Called for lo, then for lo + 1: the least of what follows lo once lo is in place.
    const auto at = scratch.begin() + static_cast<std::ptrdiff_t>(i);
    if (placed) return *std::min_element(at, scratch.end());
    std::nth_element(scratch.begin(), at, scratch.end());
    placed = true;
    return *at;
  });
}

// ---- SlidingWindow -----------------------------------------------------------------------------
//
// Invariants: upper_ holds the upper_.size() largest of the n values in the ring (as a multiset),
// ascending, and at least TopCount(n) of them; p90_ is their percentile.

namespace {

constexpr double kP90 = 0.9;

}  // namespace

size_t SlidingWindow::TopCount(size_t n) {
  // The same rank as Interpolate's: p90 reads sorted[lo] and sorted[lo + 1].
  return n == 0 ? 0 : n - static_cast<size_t>(std::floor(kP90 * static_cast<double>(n - 1)));
}

void SlidingWindow::Push(double value, size_t capacity) {
  size_t others = ring_.size();            // the values that stay
  bool changed = ring_.size() < capacity;  // n grows, and with it the rank the percentile reads
  if (!changed) {
    // The oldest leaves. Every value above upper_.front() is in upper_, and so is a copy of it:
    // taking one out leaves the largest of what stays.
    const double old = ring_[head_];
    if (!upper_.empty() && old >= upper_.front()) {
      upper_.erase(std::lower_bound(upper_.begin(), upper_.end(), old));
      changed = true;
    }
    --others;
  }
  const bool all_known = upper_.size() == others;
  PushUnsorted(value, capacity);
  if (all_known || (!upper_.empty() && value > upper_.front())) {
    upper_.insert(std::upper_bound(upper_.begin(), upper_.end(), value), value);
    changed = true;
  }
  const size_t top = TopCount(ring_.size());
  if (upper_.size() > top + kSpare) upper_.erase(upper_.begin());
  if (upper_.size() < top) Refill();
  if (changed) NoteP90();
}

void SlidingWindow::Refill() {
  upper_.resize(std::min(ring_.size(), TopCount(ring_.size()) + kSpare));
  std::partial_sort_copy(ring_.begin(), ring_.end(), upper_.begin(), upper_.end(),
                         std::greater<>());
  std::reverse(upper_.begin(), upper_.end());
}

void SlidingWindow::NoteP90() {
  // Interpolate reads two of the K largest: sorted position i is upper_'s i - (n - upper_.size()).
  const size_t skipped = ring_.size() - upper_.size();
  p90_ = Interpolate(ring_.size(), kP90, [&](size_t i) { return upper_[i - skipped]; });
}

void SlidingWindow::Clear() {
  ring_.clear();
  head_ = 0;
  upper_.clear();
  NoteP90();
}

void SlidingWindow::PushUnsorted(double value, size_t capacity) {
  if (ring_.size() < capacity) {
    if (head_ != 0) {  // a larger capacity than before: put the oldest first again
      std::rotate(ring_.begin(), ring_.begin() + static_cast<std::ptrdiff_t>(head_), ring_.end());
      head_ = 0;
    }
    ring_.push_back(value);
    return;
  }
  ring_[head_] = value;
  head_ = head_ + 1 == ring_.size() ? 0 : head_ + 1;
}

void SlidingWindow::Sort() {
  // Only the largest need an order: select and sort just those.
  Refill();
  NoteP90();
}

void SlidingWindow::Assign(std::span<const double> values, size_t capacity) {
  if (values.size() > capacity) values = values.subspan(values.size() - capacity);
  ring_.assign(values.begin(), values.end());
  head_ = 0;
  Sort();
}

std::vector<double> SlidingWindow::Values() const {
  std::vector<double> values(ring_.begin() + static_cast<std::ptrdiff_t>(head_), ring_.end());
  values.insert(values.end(), ring_.begin(), ring_.begin() + static_cast<std::ptrdiff_t>(head_));
  return values;
}

// ---- PrefixTree --------------------------------------------------------------------------------

static_assert(sizeof(TreeNode) <= 128, "a tree node is at most two cache lines");

PrefixTree::PrefixTree(PrefixTreeOptions options) : options_(options) {
  LIBRA_CHECK(options_.window >= 1) << "window must be >= 1";
}

uint32_t PrefixTree::NewNode(int depth, StateId state) {
  TreeNode& node = nodes_.emplace_back();
  if (next_spare_ < spare_.size()) {
    // A node of the cleared tree lends its window's buffers.
    node.window = std::move(spare_[next_spare_++].window);
    node.window.Clear();
  }
  node.depth = depth;
  node.state = state;
  return static_cast<uint32_t>(nodes_.size() - 1);
}

uint32_t PrefixTree::RootFor(PromptId prompt) {
  const uint64_t key = static_cast<uint64_t>(prompt.value);
  uint32_t root = prompt_roots_.Find(key);
  if (root == kNone) {
    root = NewNode(0, 0);
    prompt_roots_.Insert(key, root);
    prompt_order_.push_back(prompt.value);
  }
  return root;
}

uint32_t PrefixTree::Child(uint32_t parent, StateId state) {
  if (const uint32_t child = FindChild(parent, state); child != kNone) return child;
  const uint32_t child = NewNode(nodes_[parent].depth + 1, state);
  Link(parent, child);
  return child;
}

void PrefixTree::Link(uint32_t parent, uint32_t child) {
  children_.Insert(EdgeKey(parent, nodes_[child].state), child);
  // Append at the end of the sibling list, so that output follows creation order.
  uint32_t* link = &nodes_[parent].first_child;
  while (*link != kNone) link = &nodes_[*link].next_sibling;
  *link = child;
}

uint32_t PrefixTree::FindChild(uint32_t parent, StateId state) const {
  // Most nodes of a prompt's tree have a child or two: reading them costs less than probing the
  // edge table, which a large tree's lookups find cold. Longer lists (the global tree's) use it.
  constexpr int kListed = 4;
  uint32_t c = nodes_[parent].first_child;
  for (int i = 0; i < kListed && c != kNone; ++i, c = nodes_[c].next_sibling) {
    if (nodes_[c].state == state) return c;
  }
  return c == kNone ? kNone : children_.Find(EdgeKey(parent, state));
}

void PrefixTree::RecomputeP90(TreeNode& node) { node.p90 = node.window.P90(); }

void PrefixTree::Observe(TreeNode& node, double value, bool bulk) {
  ++node.visits;
  node.weight += 1;
  node.mean += (value - node.mean) / node.weight;
  const auto capacity = static_cast<size_t>(options_.window);
  if (bulk) {
    node.window.PushUnsorted(value, capacity);
    return;
  }
  node.window.Push(value, capacity);
  RecomputeP90(node);
}

void PrefixTree::InsertAt(uint32_t root, const TreeTrajectory& trajectory, bool bulk) {
  if (trajectory.total_length) {
    Observe(nodes_[root], *trajectory.total_length, bulk);
  } else if (!trajectory.remaining.empty()) {
    Observe(nodes_[root], trajectory.remaining[0], bulk);
  }
  uint32_t node = root;
  for (size_t i = 0; i < trajectory.states.size(); ++i) {
    node = Child(node, trajectory.states[i]);
    Observe(nodes_[node], trajectory.remaining[i], bulk);
  }
}

void PrefixTree::InsertAll(const TreeTrajectory& trajectory, bool bulk) {
  LIBRA_CHECK(trajectory.states.size() == trajectory.remaining.size())
      << "trajectory has " << trajectory.states.size() << " states but "
      << trajectory.remaining.size() << " remaining lengths";
  InsertAt(RootFor(trajectory.prompt), trajectory, bulk);
  if (global_root_ == kNone) global_root_ = NewNode(0, 0);
  InsertAt(global_root_, trajectory, bulk);
  ++total_insertions_;
}

void PrefixTree::Insert(const TreeTrajectory& trajectory) { InsertAll(trajectory, false); }

const TreeNode* PrefixTree::Walk(uint32_t root, std::span<const StateId> states, bool exact) const {
  if (root == kNone) return nullptr;
  uint32_t node = root;
  if (!exact && nodes_[node].weight < options_.min_samples) return nullptr;
  for (StateId s : states) {
    const uint32_t child = FindChild(node, s);
    if (child == kNone) return exact ? nullptr : &nodes_[node];
    if (!exact && nodes_[child].weight < options_.min_samples) break;
    node = child;
  }
  return &nodes_[node];
}

const TreeNode* PrefixTree::Lookup(PromptId prompt, std::span<const StateId> states) const {
  const uint32_t root = prompt_roots_.Find(static_cast<uint64_t>(prompt.value));
  return Walk(root != kNone ? root : global_root_, states, /*exact=*/false);
}

const TreeNode* PrefixTree::LookupExact(PromptId prompt, std::span<const StateId> states) const {
  return Walk(prompt_roots_.Find(static_cast<uint64_t>(prompt.value)), states, /*exact=*/true);
}

const TreeNode* PrefixTree::global_root() const {
  return global_root_ == kNone ? nullptr : &nodes_[global_root_];
}

void PrefixTree::Clear() {
  // The nodes are kept for their windows' buffers, which a rebuild (every few steps) takes in
  // order rather than allocating them again; those the last rebuild left are let go.
  spare_.swap(nodes_);
  next_spare_ = 0;
  nodes_.clear();
  children_.Clear();
  prompt_roots_.Clear();
  prompt_order_.clear();
  global_root_ = kNone;
  total_insertions_ = 0;
}

void PrefixTree::Rebuild(std::span<const TreeTrajectory> trajectories,
                         std::span<const TreeTrajectory> more) {
  Clear();
  for (const TreeTrajectory& t : trajectories) InsertAll(t, true);
  for (const TreeTrajectory& t : more) InsertAll(t, true);
  for (TreeNode& node : nodes_) {
    node.window.Sort();
    RecomputeP90(node);
  }
}

void PrefixTree::Decay(double factor) {
  LIBRA_CHECK(factor > 0 && factor <= 1) << "decay factor " << factor << " not in (0, 1]";
  if (factor == 1) return;
  for (TreeNode& node : nodes_) node.weight *= factor;
}

uint32_t PrefixTree::CopySubtree(const PrefixTree& other, uint32_t from,
                                 std::span<const StateId> state_map, int depth, StateId state) {
  const uint32_t node = NewNode(depth, state);
  const TreeNode& src = other.nodes_[from];
  nodes_[node].mean = src.mean;
  nodes_[node].p90 = src.p90;
  nodes_[node].visits = src.visits;
  nodes_[node].weight = src.weight;
  if (static_cast<int>(src.window.size()) > options_.window) {
    nodes_[node].window.Assign(src.window.Values(), static_cast<size_t>(options_.window));
    RecomputeP90(nodes_[node]);
  } else {
    nodes_[node].window = src.window;
  }
  for (uint32_t c = src.first_child; c != kNone; c = other.nodes_[c].next_sibling) {
    const StateId mapped = state_map[other.nodes_[c].state];
    Link(node, CopySubtree(other, c, state_map, depth + 1, mapped));
  }
  return node;
}

void PrefixTree::MergeNode(uint32_t into, const PrefixTree& other, uint32_t from,
                           std::span<const StateId> state_map) {
  {
    TreeNode& dst = nodes_[into];
    const TreeNode& src = other.nodes_[from];
    const double w = dst.weight + src.weight;
    if (w > 0) dst.mean = (dst.mean * dst.weight + src.mean * src.weight) / w;
    dst.weight = w;
    dst.visits += src.visits;
    std::vector<double> values = dst.window.Values();
    const std::vector<double> more = src.window.Values();
    values.insert(values.end(), more.begin(), more.end());
    dst.window.Assign(values, static_cast<size_t>(options_.window));
    if (!dst.window.empty()) RecomputeP90(dst);
  }
  for (uint32_t c = other.nodes_[from].first_child; c != kNone; c = other.nodes_[c].next_sibling) {
    const StateId mapped = state_map[other.nodes_[c].state];
    const uint32_t existing = FindChild(into, mapped);
    if (existing != kNone) {
      MergeNode(existing, other, c, state_map);
    } else {
      Link(into, CopySubtree(other, c, state_map, nodes_[into].depth + 1, mapped));
    }
  }
}

void PrefixTree::Merge(const PrefixTree& other) {
  // Map the other tree's state ids to ours (every id of a tool the other table knows).
  std::vector<StateId> state_map(other.states_.tool_count() * 9);
  for (StateId id = 0; id < state_map.size(); ++id) {
    state_map[id] = states_.InternKey(other.states_.Key(id)).value();
  }
  for (int64_t prompt : other.prompt_order_) {
    const uint32_t from = other.prompt_roots_.Find(static_cast<uint64_t>(prompt));
    const uint32_t mine = prompt_roots_.Find(static_cast<uint64_t>(prompt));
    if (mine == kNone) {
      const uint32_t root = CopySubtree(other, from, state_map, 0, 0);
      prompt_roots_.Insert(static_cast<uint64_t>(prompt), root);
      prompt_order_.push_back(prompt);
    } else {
      MergeNode(mine, other, from, state_map);
    }
  }
  if (other.global_root_ != kNone) {
    if (global_root_ == kNone) {
      global_root_ = CopySubtree(other, other.global_root_, state_map, 0, 0);
    } else {
      MergeNode(global_root_, other, other.global_root_, state_map);
    }
  }
  total_insertions_ += other.total_insertions_;
}

size_t PrefixTree::SubtreeSize(uint32_t node) const {
  size_t n = 1;
  for (uint32_t c = nodes_[node].first_child; c != kNone; c = nodes_[c].next_sibling) {
    n += SubtreeSize(c);
  }
  return n;
}

size_t PrefixTree::global_node_count() const {
  return global_root_ == kNone ? 0 : SubtreeSize(global_root_);
}

int PrefixTree::max_depth() const {
  int depth = 0;
  for (const TreeNode& n : nodes_) depth = std::max(depth, n.depth);
  return depth;
}

// ---- Persistence -------------------------------------------------------------------------------
//
// {"version": 2, "total_insertions": N, "roots": {"<prompt>": node}, "global_root": node|null}
// node = {"key", "depth", "mean_remaining_length", "p90_remaining_length", "visit_count",
//         "weight" (libra; optional on load, default visit_count), "remaining_lengths": [...],
//         "children": {"<tool>:<size>:<status>": node}}

JsonValue PrefixTree::NodeToJson(uint32_t index, const std::string& key) const {
  const TreeNode& node = nodes_[index];
  JsonValue children = JsonValue::MakeObject();
  for (uint32_t c = node.first_child; c != kNone; c = nodes_[c].next_sibling) {
    const std::string state = states_.Key(nodes_[c].state);
    const std::string child_key =
        node.depth == 0 ? key.substr(0, key.size() - 5) + ":[" + state + "]"  // "<p>:root"
                        : key.substr(0, key.size() - 1) + "," + state + "]";
    children.Set(state, NodeToJson(c, child_key));
  }
  JsonValue window = JsonValue::MakeArray();
  for (double v : node.window.Values()) window.Append(v);
  return JsonValue::MakeObject()
      .Set("key", key)
      .Set("depth", node.depth)
      .Set("mean_remaining_length", node.mean)
      .Set("p90_remaining_length", node.p90)
      .Set("visit_count", node.visits)
      .Set("weight", node.weight)
      .Set("remaining_lengths", std::move(window))
      .Set("children", std::move(children));
}

JsonValue PrefixTree::ToJsonValue() const {
  JsonValue roots = JsonValue::MakeObject();
  for (int64_t prompt : prompt_order_) {
    const std::string p = std::to_string(prompt);
    roots.Set(p, NodeToJson(prompt_roots_.Find(static_cast<uint64_t>(prompt)), p + ":root"));
  }
  return JsonValue::MakeObject()
      .Set("version", 2)
      .Set("total_insertions", total_insertions_)
      .Set("roots", std::move(roots))
      .Set("global_root",
           global_root_ == kNone ? JsonValue() : NodeToJson(global_root_, "__global__:root"));
}

namespace {

Status Bad(const std::string& where, const std::string& what) {
  return Status::InvalidArgument(where + ": " + what);
}

bool ParsePrompt(const std::string& text, int64_t* out) {
  if (text.empty() || text.size() > 18) return false;
  int64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  *out = v;
  return true;
}

}  // namespace

Status PrefixTree::NodeFromJson(const JsonValue& value, const std::string& where, uint32_t index) {
  if (!value.is_object())
    return Bad(where, std::string("expected an object, got ") + value.type_name());
  static const char* const kKnown[] = {
      "key",         "depth",  "mean_remaining_length", "p90_remaining_length",
      "visit_count", "weight", "remaining_lengths",     "children"};
  for (const auto& member : value.as_object()) {
    const std::string& k = member.first;  // a structured binding: clang 14 cannot capture one
    if (std::find_if(std::begin(kKnown), std::end(kKnown), [&](const char* s) { return k == s; }) ==
        std::end(kKnown)) {
      return Bad(where, "unknown member '" + k + "'");
    }
  }
  auto number = [&](const char* key, bool required, double* out) -> Status {
    const JsonValue* v = value.Find(key);
    if (v == nullptr) return required ? Bad(where, std::string("missing '") + key + "'") : Status();
    if (!v->is_number() || !std::isfinite(v->as_double())) {
      return Bad(where + "." + key, std::string("expected a number, got ") + v->type_name());
    }
    *out = v->as_double();
    return Status();
  };
  if (const JsonValue* k = value.Find("key"); k != nullptr && !k->is_string()) {
    return Bad(where + ".key", std::string("expected a string, got ") + k->type_name());
  }
  const JsonValue* depth = value.Find("depth");
  if (depth != nullptr && (!depth->is_int() || depth->as_int() != nodes_[index].depth)) {
    return Bad(where + ".depth",
               "expected " + std::to_string(nodes_[index].depth) + ", got " + ToJson(*depth));
  }
  const JsonValue* visits = value.Find("visit_count");
  if (visits == nullptr) return Bad(where, "missing 'visit_count'");
  if (!visits->is_int() || visits->as_int() < 0) {
    return Bad(where + ".visit_count", "expected a non-negative integer, got " + ToJson(*visits));
  }
  double mean = 0, p90 = 0;
  double weight = static_cast<double>(visits->as_int());
  LIBRA_RETURN_IF_ERROR(number("mean_remaining_length", true, &mean));
  LIBRA_RETURN_IF_ERROR(number("p90_remaining_length", true, &p90));
  LIBRA_RETURN_IF_ERROR(number("weight", false, &weight));
  if (weight < 0) return Bad(where + ".weight", "must be >= 0");
  std::vector<double> window;
  if (const JsonValue* w = value.Find("remaining_lengths"); w != nullptr) {
    if (!w->is_array()) {
      return Bad(where + ".remaining_lengths",
                 std::string("expected an array, got ") + w->type_name());
    }
    for (size_t i = 0; i < w->as_array().size(); ++i) {
      const JsonValue& x = w->as_array()[i];
      if (!x.is_number() || !std::isfinite(x.as_double())) {
        return Bad(where + ".remaining_lengths[" + std::to_string(i) + "]",
                   std::string("expected a number, got ") + x.type_name());
      }
      window.push_back(x.as_double());
    }
  }
  TreeNode& node = nodes_[index];
  node.mean = mean;
  node.p90 = p90;
  node.visits = visits->as_int();
  node.weight = weight;
  node.window.Assign(window, static_cast<size_t>(options_.window));
  const JsonValue* children = value.Find("children");
  if (children == nullptr) return Status();
  if (!children->is_object()) {
    return Bad(where + ".children",
               std::string("expected an object, got ") + children->type_name());
  }
  for (const auto& [key, child] : children->as_object()) {
    const std::string child_where = where + ".children[\"" + key + "\"]";
    Result<StateId> state = states_.InternKey(key);
    if (!state.ok()) return Bad(child_where, state.status().message());
    const uint32_t c = Child(index, *state);
    LIBRA_RETURN_IF_ERROR(NodeFromJson(child, child_where, c));
  }
  return Status();
}

Result<PrefixTree> PrefixTree::FromJsonValue(const JsonValue& document, PrefixTreeOptions options) {
  PrefixTree tree(options);
  if (!document.is_object()) return Bad("document", "expected an object");
  for (const auto& [k, v] : document.as_object()) {
    if (k != "version" && k != "total_insertions" && k != "roots" && k != "global_root") {
      return Bad("document", "unknown member '" + k + "'");
    }
  }
  const JsonValue* version = document.Find("version");
  int64_t v = 1;
  if (version != nullptr) {
    if (!version->is_int() || (version->as_int() != 1 && version->as_int() != 2)) {
      return Bad("version", "expected 1 or 2, got " + ToJson(*version));
    }
    v = version->as_int();
  }
  if (const JsonValue* n = document.Find("total_insertions"); n != nullptr) {
    if (!n->is_int() || n->as_int() < 0) {
      return Bad("total_insertions", "expected a non-negative integer, got " + ToJson(*n));
    }
    tree.total_insertions_ = n->as_int();
  }
  const JsonValue* roots = document.Find("roots");
  if (roots == nullptr) return Bad("document", "missing 'roots'");
  if (!roots->is_object())
    return Bad("roots", std::string("expected an object, got ") + roots->type_name());
  for (const auto& [prompt_text, node] : roots->as_object()) {
    int64_t prompt = 0;
    if (!ParsePrompt(prompt_text, &prompt)) {
      return Bad("roots[\"" + prompt_text + "\"]", "prompt id must be a non-negative integer");
    }
    const uint32_t root = tree.RootFor(PromptId(prompt));
    LIBRA_RETURN_IF_ERROR(tree.NodeFromJson(node, "roots[\"" + prompt_text + "\"]", root));
  }
  const JsonValue* global = document.Find("global_root");
  if (global != nullptr && !global->is_null()) {
    tree.global_root_ = tree.NewNode(0, 0);
    LIBRA_RETURN_IF_ERROR(tree.NodeFromJson(*global, "global_root", tree.global_root_));
  } else if (v == 1 || global == nullptr) {
    // Version 1 has no global root: synthesise it by merging every prompt tree.
    PrefixTree prompts_only = tree;
    for (int64_t prompt : prompts_only.prompt_order_) {
      const uint32_t from = prompts_only.prompt_roots_.Find(static_cast<uint64_t>(prompt));
      std::vector<StateId> identity(tree.states_.tool_count() * 9);
      for (StateId id = 0; id < identity.size(); ++id) identity[id] = id;
      if (tree.global_root_ == kNone) {
        tree.global_root_ = tree.CopySubtree(prompts_only, from, identity, 0, 0);
      } else {
        tree.MergeNode(tree.global_root_, prompts_only, from, identity);
      }
    }
  }
  return tree;
}

}  // namespace libra::sched
