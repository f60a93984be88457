// Symbolic sizes (src/core/symbolic.h): canonical forms make equal expressions one id, evaluation
// and bounds are exact and checked, and a random property test holds evaluation inside bounds.
#include "core/symbolic.h"

#include <gtest/gtest.h>

#include <random>

namespace baton::sym {
namespace {

struct Fixture {
  SymbolTable t;
  SizeExpr batch = t.add_symbol("batch", 1, 32).value();
  SizeExpr seq = t.add_symbol("seq", 1, 384).value();
  SizeExpr c(int64_t v) { return t.constant(v); }
};

TEST(Symbolic, SumsAndProductsHaveOneCanonicalForm) {
  Fixture f;
  SymbolTable& t = f.t;
  EXPECT_EQ(*t.add(f.batch, f.seq), *t.add(f.seq, f.batch));
  EXPECT_EQ(*t.mul(f.batch, f.seq), *t.mul(f.seq, f.batch));
  // (batch + 1) + (seq + 2) = batch + seq + 3, whichever way it is built.
  const SizeExpr a = *t.add(*t.add(f.batch, f.c(1)), *t.add(f.seq, f.c(2)));
  const SizeExpr b = *t.add(*t.add(f.seq, f.batch), f.c(3));
  EXPECT_EQ(a, b);
  EXPECT_EQ(t.node(a).operands.size(), 3u);
  EXPECT_EQ(t.constant_value(t.node(a).operands.back()), 3);
  // 2 * (3 * batch) = 6 * batch, the coefficient first.
  const SizeExpr six = *t.mul(f.c(2), *t.mul(f.c(3), f.batch));
  EXPECT_EQ(six, *t.mul(f.batch, f.c(6)));
  EXPECT_EQ(t.constant_value(t.node(six).operands[0]), 6);
  EXPECT_EQ(t.to_string(six), "6 * batch");
  // Identities and zero.
  EXPECT_EQ(*t.add(f.batch, f.c(0)), f.batch);
  EXPECT_EQ(*t.mul(f.batch, f.c(1)), f.batch);
  EXPECT_EQ(*t.mul(f.batch, f.c(0)), f.c(0));
  EXPECT_EQ(*t.add(f.c(4), f.c(5)), f.c(9));
  // Building the same expression again adds nothing to the table.
  const size_t before = t.size();
  EXPECT_EQ(*t.add(*t.add(f.batch, f.c(1)), *t.add(f.seq, f.c(2))), a);
  EXPECT_EQ(t.size(), before);
}

TEST(Symbolic, DivisionMinAndMaxSimplifyWhatTheyCan) {
  Fixture f;
  SymbolTable& t = f.t;
  EXPECT_EQ(*t.floor_div(f.batch, f.c(1)), f.batch);
  EXPECT_EQ(*t.floor_div(f.c(7), f.c(2)), f.c(3));
  EXPECT_EQ(*t.ceil_div(f.c(7), f.c(2)), f.c(4));
  // floor(6 * batch * seq / 3) = 2 * batch * seq.
  const SizeExpr prod = *t.mul(*t.mul(f.c(6), f.batch), f.seq);
  EXPECT_EQ(*t.floor_div(prod, f.c(3)), *t.mul(*t.mul(f.batch, f.seq), f.c(2)));
  EXPECT_EQ(*t.ceil_div(*t.mul(f.c(4), f.seq), f.c(4)), f.seq);
  const SizeExpr half = *t.floor_div(*t.add(f.seq, f.c(1)), f.c(2));
  EXPECT_EQ(t.to_string(half), "floor((seq + 1) / 2)");
  EXPECT_EQ(t.min(f.seq, f.seq), f.seq);
  EXPECT_EQ(t.max(f.c(3), f.c(8)), f.c(8));
  EXPECT_EQ(t.min(f.batch, f.seq), t.min(f.seq, f.batch));
  EXPECT_FALSE(t.floor_div(f.batch, f.c(0)).ok());
  EXPECT_FALSE(t.ceil_div(f.batch, f.c(-2)).ok());
}

TEST(Symbolic, EvaluationChecksRangesAndOverflow) {
  Fixture f;
  SymbolTable& t = f.t;
  const SizeExpr e = *t.floor_div(*t.add(*t.mul(f.batch, f.seq), f.c(1)), f.c(2));
  const std::vector<int64_t> values = {3, 77};
  EXPECT_EQ(*t.evaluate(e, values), (3 * 77 + 1) / 2);
  EXPECT_EQ(*t.evaluate(*t.ceil_div(f.seq, f.c(8)), values), 10);
  EXPECT_EQ(*t.evaluate(t.max(f.batch, f.c(5)), values), 5);
  const Result<int64_t> out = t.evaluate(e, std::vector<int64_t>{33, 5});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("symbol 'batch' is 33, outside its range 1..32"),
            std::string::npos)
      << out.status().message();
  EXPECT_FALSE(t.evaluate(e, std::vector<int64_t>{3}).ok()) << "seq has no value";
  SymbolTable big;
  const SizeExpr n = *big.add_symbol("n", 1, int64_t{1} << 40);
  const SizeExpr cube = *big.mul(*big.mul(n, n), n);
  EXPECT_FALSE(big.evaluate(cube, std::vector<int64_t>{int64_t{1} << 30}).ok());
  EXPECT_FALSE(big.bounds(cube).ok());
  EXPECT_FALSE(big.mul(big.constant(int64_t{1} << 62), big.constant(4)).ok());
}

TEST(Symbolic, SymbolsAreDeclaredOnceWithAValidRange) {
  SymbolTable t;
  EXPECT_TRUE(t.add_symbol("batch", 1, 8).ok());
  EXPECT_FALSE(t.add_symbol("batch", 1, 8).ok());
  EXPECT_FALSE(t.add_symbol("seq", 9, 8).ok());
  EXPECT_FALSE(t.add_symbol("neg", -1, 8).ok());
  EXPECT_EQ(t.find_symbol("batch"), t.add(*t.find_symbol("batch"), t.constant(0)).value());
  EXPECT_FALSE(t.find_symbol("seq").has_value());
}

TEST(Symbolic, BoundsAreTheExtremesOverTheRanges) {
  Fixture f;
  SymbolTable& t = f.t;
  const SizeExpr tokens = *t.mul(f.batch, f.seq);
  Bounds b = *t.bounds(tokens);
  EXPECT_EQ(b.lo, 1);
  EXPECT_EQ(b.hi, 32 * 384);
  b = *t.bounds(*t.floor_div(*t.add(f.seq, f.c(1)), f.c(2)));
  EXPECT_EQ(b.lo, 1);
  EXPECT_EQ(b.hi, 192);
  b = *t.bounds(t.min(f.batch, f.c(16)));
  EXPECT_EQ(b.hi, 16);
  b = *t.bounds(*t.ceil_div(f.seq, f.batch));
  EXPECT_EQ(b.lo, 1);
  EXPECT_EQ(b.hi, 384);
}

// Random expressions over three symbols: every evaluation at random in-range values lies inside
// the bounds, and rebuilding an expression from the same steps gives the same id.
TEST(Symbolic, RandomExpressionsEvaluateInsideTheirBounds) {
  SymbolTable t;
  const SizeExpr syms[] = {*t.add_symbol("a", 0, 9), *t.add_symbol("b", 1, 40),
                           *t.add_symbol("c", 2, 3)};
  std::mt19937 rng(36);
  std::vector<SizeExpr> pool(std::begin(syms), std::end(syms));
  for (int64_t v : {0, 1, 2, 3, 7}) pool.push_back(t.constant(v));
  for (int step = 0; step < 400; ++step) {
    const SizeExpr x = pool[rng() % pool.size()], y = pool[rng() % pool.size()];
    Result<SizeExpr> e = x;
    switch (rng() % 6) {
      case 0:
        e = t.add(x, y);
        break;
      case 1:
        e = t.mul(x, y);
        break;
      case 2:
        e = t.floor_div(x, t.add(y, t.constant(1)).value());
        break;
      case 3:
        e = t.ceil_div(x, t.add(y, t.constant(1)).value());
        break;
      case 4:
        e = t.min(x, y);
        break;
      default:
        e = t.max(x, y);
        break;
    }
    if (!e.ok()) continue;
    const Result<Bounds> b = t.bounds(*e);
    if (!b.ok()) continue;  // too large for int64: refused, not wrapped
    pool.push_back(*e);
    for (int trial = 0; trial < 8; ++trial) {
      const std::vector<int64_t> values = {static_cast<int64_t>(rng() % 10),
                                           static_cast<int64_t>(1 + rng() % 40),
                                           static_cast<int64_t>(2 + rng() % 2)};
      const Result<int64_t> v = t.evaluate(*e, values);
      ASSERT_TRUE(v.ok()) << t.to_string(*e) << ": " << v.status().to_string();
      EXPECT_LE(b->lo, *v) << t.to_string(*e);
      EXPECT_GE(b->hi, *v) << t.to_string(*e);
    }
  }
  EXPECT_GT(pool.size(), 200u);
}

}  // namespace
}  // namespace baton::sym
