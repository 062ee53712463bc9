// FixedPlanner: plays back a plan another planner made, and never re-plans. `libra plan --check`
// and the regret benchmark simulate a given layout with it: the layout the planner chose (or any
// candidate), held for the whole run, with the planning planner's own behaviour while the
// trainer waits (a hybrid layout lends the trainer's GPUs to rollout).
//
// Not in the registry: it is built around a plan, not from recipe options.
#pragma once

#include <memory>

#include "planner/planner.h"

namespace libra::planner {

class FixedPlanner : public Planner {
 public:
  /// `lender`, when given, answers IdleTrainerLayout (it must outlive this planner); without
  /// one the trainer's GPUs stay idle while it waits.
  explicit FixedPlanner(Plan plan, const Planner* lender = nullptr)
      : plan_(std::move(plan)), lender_(lender) {}

  std::string_view Name() const override { return "fixed"; }
  /// The plan, whatever the context.
  Result<Plan> Initial(const PlanContext& /*context*/) override { return plan_; }
  std::optional<backend::Layout> IdleTrainerLayout(const backend::Layout& current) const override {
    return lender_ != nullptr ? lender_->IdleTrainerLayout(current) : std::nullopt;
  }

 private:
  Plan plan_;
  const Planner* lender_;
};

}  // namespace libra::planner
