#include "common/registry.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "support/test_util.h"

namespace libra {
namespace {

class Shape {
 public:
  virtual ~Shape() = default;
  virtual int sides() const = 0;
};

class Polygon : public Shape {
 public:
  explicit Polygon(int sides) : sides_(sides) {}
  int sides() const override { return sides_; }

 private:
  int sides_;
};

using ShapeRegistry = Registry<Shape, int>;

Result<std::unique_ptr<Shape>> MakeTriangle(int scale) {
  if (scale <= 0) return Status::InvalidRecipe("triangle", "scale must be positive");
  return std::unique_ptr<Shape>(std::make_unique<Polygon>(3 * scale));
}

Result<std::unique_ptr<Shape>> MakeSquare(int scale) {
  return std::unique_ptr<Shape>(std::make_unique<Polygon>(4 * scale));
}

ShapeRegistry MakeRegistry() {
  ShapeRegistry registry("shape");
  EXPECT_OK(registry.Register("triangle", "three sides", &MakeTriangle));
  EXPECT_OK(registry.Register("square", "four sides", &MakeSquare));
  return registry;
}

TEST(RegistryTest, CreatesRegisteredNamesWithArguments) {
  // Create runs the named factory with the arguments given.
  const ShapeRegistry registry = MakeRegistry();
  auto triangle = registry.Create("triangle", 2);
  ASSERT_OK(triangle);
  EXPECT_EQ((*triangle)->sides(), 6);
  auto square = registry.Create("square", 1);
  ASSERT_OK(square);
  EXPECT_EQ((*square)->sides(), 4);
}

TEST(RegistryTest, FactoryErrorsPassThrough) {
  // A factory's own error (bad options) is returned unchanged.
  const ShapeRegistry registry = MakeRegistry();
  auto bad = registry.Create("triangle", 0);
  EXPECT_EQ(bad.status(), Status::InvalidRecipe("triangle", "scale must be positive"));
}

TEST(RegistryTest, DuplicateRegistrationIsInternalError) {
  // Registering a taken name is a bug (kInternal) and keeps the first factory.
  ShapeRegistry registry = MakeRegistry();
  const Status s = registry.Register("square", "again", &MakeTriangle);
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_EQ(s.message(), "shape 'square' is registered twice");
  EXPECT_EQ(registry.Summary("square"), "four sides");
  auto square = registry.Create("square", 1);
  ASSERT_OK(square);
  EXPECT_EQ((*square)->sides(), 4);
}

TEST(RegistryTest, UnknownNameListsKnownNamesAndSuggestsClosest) {
  // An unknown name is kNotFound; the message names the family, lists the known names in order
  // and suggests the closest one when there is a close one.
  const ShapeRegistry registry = MakeRegistry();
  struct Case {
    std::string name;
    std::string requested;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"typo", "sqare", "unknown shape 'sqare' (known: square, triangle); did you mean 'square'?"},
      {"nothing close", "hexagon", "unknown shape 'hexagon' (known: square, triangle)"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto made = registry.Create(c.requested, 1);
    ASSERT_FALSE(made.ok());
    EXPECT_EQ(made.status().code(), StatusCode::kNotFound);
    EXPECT_EQ(made.status().message(), c.message);
    EXPECT_EQ(registry.UnknownMessage(c.requested), c.message);
  }
}

TEST(RegistryTest, NamesSummariesAndContains) {
  // Names are sorted; Summary is the registered line (empty for an unknown name).
  const ShapeRegistry registry = MakeRegistry();
  EXPECT_EQ(registry.Names(), (std::vector<std::string>{"square", "triangle"}));
  EXPECT_EQ(registry.family(), "shape");
  EXPECT_TRUE(registry.Contains("triangle"));
  EXPECT_FALSE(registry.Contains("circle"));
  EXPECT_EQ(registry.Summary("triangle"), "three sides");
  EXPECT_EQ(registry.Summary("circle"), "");
}

TEST(RegistryTest, EmptyRegistryListsNothing) {
  // With nothing registered the message still reads well.
  const ShapeRegistry registry("shape");
  EXPECT_TRUE(registry.Names().empty());
  EXPECT_EQ(registry.Create("x", 1).status(), Status::NotFound("unknown shape 'x' (known: )"));
}

}  // namespace
}  // namespace libra
