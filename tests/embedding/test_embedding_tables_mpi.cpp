// Many embedding tables in one context (EmbeddingTables) over real processes (mpirun -np 2-3):
// 26 tables of different dims and different row partitions (uneven blocks, a rank with no rows,
// every row on one rank) looked up together, every byte against a sequential reference of every
// table, for the plain gather, the de-duplicated gather and the cache; gradients pushed for all
// tables at once are seen by the next lookups; the lookups of all tables go out in one gather;
// an out-of-range id of any table is refused on every rank that sends one (the message names the
// table and the id) and changes no byte anywhere; ranks that disagree on the tables refuse.
// Ranks wait for each other with ctx.quiesce() (an MPI_Barrier would stop an INLINE engine from
// serving its peers). NETSPARSE_TEST_PROGRESS=thread|inline picks the engine's progress mode.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "netsparse/embedding.hpp"
#include "netsparse/netsparse_mpi.h"

using netsparse::EmbeddingOptions;
using netsparse::EmbeddingTables;
using netsparse::EmbeddingTableShape;

namespace {

constexpr std::size_t kTables = 26;

netsparse::Context open_context() {
  const char* p = std::getenv("NETSPARSE_TEST_PROGRESS");
  const bool inline_progress = p != nullptr && std::string(p) == "inline";
  return netsparse::open_mpi(
      MPI_COMM_WORLD,
      netsparse::ContextAttr().progress(inline_progress ? NS_PROGRESS_INLINE : NS_PROGRESS_THREAD));
}

// Table t: dim 1-16 (several widths, the widest 16), rows 20-280, and one of four partitions:
// uneven blocks, rank 0 owns nothing, everything on the last rank, equal blocks.
std::vector<EmbeddingTableShape> shapes_for(int size) {
  std::vector<EmbeddingTableShape> shapes;
  for (std::size_t t = 0; t < kTables; ++t) {
    EmbeddingTableShape s;
    s.dim = static_cast<std::uint32_t>(1 + (t * 7) % 16);
    const std::uint64_t rows = 20 + (t * 37) % 261;
    s.row_offsets.assign(1, 0);
    for (int p = 0; p < size; ++p) {
      std::uint64_t end = 0;
      switch (t % 4) {
        case 0:  // uneven: the first ranks own less
          end = rows * static_cast<std::uint64_t>((p + 1) * (p + 2)) /
                static_cast<std::uint64_t>(size * (size + 1));
          break;
        case 1:  // rank 0 owns no row
          end = p == 0 ? 0 : rows * static_cast<std::uint64_t>(p) / (size - 1);
          break;
        case 2:  // every row on the last rank
          end = p == size - 1 ? rows : 0;
          break;
        default:  // equal blocks
          end = rows * static_cast<std::uint64_t>(p + 1) / static_cast<std::uint64_t>(size);
      }
      s.row_offsets.push_back(end);
    }
    shapes.push_back(std::move(s));
  }
  return shapes;
}

// Exact in fp32 (quarters of small integers), different per (table, id, element).
float initial(std::size_t t, std::uint64_t id, std::uint32_t e) {
  return static_cast<float>(static_cast<int>((t * 13 + id * 31 + e * 7) % 64) - 32) * 0.25f;
}
float delta(std::size_t t, std::uint64_t id, std::uint32_t e, int iteration) {
  return static_cast<float>(static_cast<int>((t + id * 5 + e * 3 + iteration * 11) % 9) - 4) *
         0.25f;
}

// Every table whole, as every rank holds it for checking.
struct Reference {
  explicit Reference(const std::vector<EmbeddingTableShape>& shapes) {
    for (std::size_t t = 0; t < shapes.size(); ++t) {
      const std::uint32_t dim = shapes[t].dim;
      std::vector<float> rows(shapes[t].row_offsets.back() * dim);
      for (std::uint64_t id = 0; id < shapes[t].row_offsets.back(); ++id)
        for (std::uint32_t e = 0; e < dim; ++e) rows[id * dim + e] = initial(t, id, e);
      tables.push_back(std::move(rows));
      dims.push_back(dim);
    }
  }
  std::vector<std::vector<float>> tables;
  std::vector<std::uint32_t> dims;
};

void fill_local(EmbeddingTables& set, const std::vector<EmbeddingTableShape>& shapes, int rank) {
  const std::uint32_t stride = set.row_stride();
  for (std::size_t t = 0; t < set.count(); ++t) {
    const std::span<float> mine = set.local_rows(t);
    const std::uint64_t first = shapes[t].row_offsets[static_cast<std::size_t>(rank)];
    for (std::size_t k = 0; k < mine.size() / stride; ++k)
      for (std::uint32_t e = 0; e < set.dim(t); ++e)
        mine[k * stride + e] = initial(t, first + k, e);
  }
}

// Per table a batch with heavy duplication (Zipf-like: most lookups into a few hot ids).
std::vector<std::vector<std::uint64_t>> batches(int rank, int iteration,
                                                const std::vector<EmbeddingTableShape>& shapes) {
  std::mt19937_64 rng(1000003ull * static_cast<std::uint64_t>(rank) + 7919ull * iteration + 1);
  std::vector<std::vector<std::uint64_t>> ids(shapes.size());
  for (std::size_t t = 0; t < shapes.size(); ++t) {
    const std::uint64_t total = shapes[t].row_offsets.back();
    ids[t].resize(50 + (t * 29) % 150);
    for (auto& id : ids[t]) id = rng() % 10 < 7 ? rng() % 5 * (total / 5) : rng() % total;
  }
  return ids;
}

// The first (table, position) whose row differs from the reference, as text; "" if none.
std::string first_mismatch(const std::vector<std::vector<std::uint64_t>>& ids,
                           const std::vector<std::vector<float>>& out, const Reference& ref) {
  for (std::size_t t = 0; t < ids.size(); ++t) {
    const std::uint32_t dim = ref.dims[t];
    for (std::size_t j = 0; j < ids[t].size(); ++j) {
      if (std::memcmp(out[t].data() + j * dim, ref.tables[t].data() + ids[t][j] * dim,
                      dim * sizeof(float)) != 0)
        return "table " + std::to_string(t) + " position " + std::to_string(j);
    }
  }
  return {};
}

// Runs one lookup of every table's ids into fresh outputs.
std::vector<std::vector<float>> lookup_all(EmbeddingTables& set,
                                           const std::vector<std::vector<std::uint64_t>>& ids) {
  std::vector<std::vector<float>> out(ids.size());
  std::vector<std::span<const std::uint64_t>> id_spans;
  std::vector<std::span<float>> out_spans;
  for (std::size_t t = 0; t < ids.size(); ++t) {
    out[t].assign(ids[t].size() * set.dim(t), -1000.0f);
    id_spans.emplace_back(ids[t]);
    out_spans.emplace_back(out[t]);
  }
  set.lookup(id_spans, out_spans);
  return out;
}

std::vector<std::vector<std::uint64_t>> every_row(const std::vector<EmbeddingTableShape>& shapes) {
  std::vector<std::vector<std::uint64_t>> ids(shapes.size());
  for (std::size_t t = 0; t < shapes.size(); ++t)
    for (std::uint64_t id = 0; id < shapes[t].row_offsets.back(); ++id) ids[t].push_back(id);
  return ids;
}

bool all_ranks(bool ok) {
  int mine = ok ? 1 : 0, all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return all == 1;
}

class EmbeddingTablesMpi : public ::testing::Test {
 protected:
  netsparse::Context ctx = open_context();
  int rank = ctx.rank(), size = ctx.size();
  std::vector<EmbeddingTableShape> shapes = shapes_for(size);
};

}  // namespace

// Every policy, 26 tables looked up together, pushes between iterations: every byte of every
// table equals the sequential reference, before and after every update, and a lookup of all
// tables is one gather of rows (plus the version gather when the cache is on).
TEST_F(EmbeddingTablesMpi, ManyTablesMatchTheReferenceThroughUpdates) {
  struct Policy {
    const char* name;
    EmbeddingOptions options;
  };
  const Policy policies[] = {{"plain", {0, false}},
                             {"dedup", {0, true}},
                             {"cache-16", {16, true, 4}},
                             {"cache-all", {100000, true, 4}}};
  for (const Policy& policy : policies) {
    EmbeddingTables set(ctx, shapes, policy.options);
    ASSERT_EQ(set.count(), kTables);
    ASSERT_EQ(set.row_stride(), 16u);
    fill_local(set, shapes, rank);
    ctx.quiesce();
    Reference ref(shapes);
    for (int it = 0; it < 4; ++it) {
      const auto ids = batches(rank, it, shapes);
      set.reset_stats();
      auto out = lookup_all(set, ids);
      EXPECT_EQ(first_mismatch(ids, out, ref), "") << policy.name << " iteration " << it;
      const netsparse::EmbeddingStats s = set.stats();
      const std::uint64_t per_lookup = policy.options.cache_rows > 0 ? 2u : 1u;
      EXPECT_LE(s.gathers, per_lookup) << policy.name << ": one gather for all tables";
      EXPECT_GE(s.gathers, 1u) << policy.name;
      out = lookup_all(set, ids);  // again: the cache serves what it holds, still right
      EXPECT_EQ(first_mismatch(ids, out, ref), "") << policy.name << " iteration " << it;
      // Gradients of every table's batch, one per lookup (repeats summed), pushed together.
      // Odd iterations push another batch of the same sizes than the one looked up: a push
      // must not take the lookup's de-duplication for ids it does not hold.
      const auto pushed = it % 2 == 1 ? batches(rank, it + 100, shapes) : ids;
      std::vector<std::vector<float>> g(kTables);
      std::vector<std::span<const std::uint64_t>> id_spans;
      std::vector<std::span<const float>> g_spans;
      for (std::size_t t = 0; t < kTables; ++t) {
        const std::uint32_t dim = shapes[t].dim;
        for (const std::uint64_t id : pushed[t])
          for (std::uint32_t e = 0; e < dim; ++e) g[t].push_back(delta(t, id, e, it));
        id_spans.emplace_back(pushed[t]);
        g_spans.emplace_back(g[t]);
      }
      ctx.quiesce();  // every rank's lookups done before anyone's rows change
      set.push_gradients(id_spans, g_spans);
      ctx.quiesce();  // every rank's update in before anyone looks up again
      for (int p = 0; p < size; ++p) {
        const auto theirs = batches(p, it % 2 == 1 ? it + 100 : it, shapes);
        for (std::size_t t = 0; t < kTables; ++t) {
          const std::uint32_t dim = shapes[t].dim;
          for (const std::uint64_t id : theirs[t])
            for (std::uint32_t e = 0; e < dim; ++e)
              ref.tables[t][id * dim + e] += delta(t, id, e, it);
        }
      }
    }
    // Every row of every table, after all the updates.
    const auto all = every_row(shapes);
    const auto out = lookup_all(set, all);
    EXPECT_EQ(first_mismatch(all, out, ref), "") << policy.name << " (every row)";
    if (policy.options.cache_rows > 0) {
      EXPECT_GT(set.stats().cache_stale, 0u) << policy.name;
    }
    ctx.quiesce();
  }
}

// The rows a rank writes through local_rows(t) (padded to row_stride) are what the peers read,
// after local_rows_changed() (cached copies are refused).
TEST_F(EmbeddingTablesMpi, LocalRowsAreEachTablesBlock) {
  EmbeddingTables set(ctx, shapes, EmbeddingOptions{100000, true});
  fill_local(set, shapes, rank);
  ctx.quiesce();
  Reference ref(shapes);
  const auto all = every_row(shapes);
  EXPECT_EQ(first_mismatch(all, lookup_all(set, all), ref), "");  // fills the caches
  ctx.quiesce();
  const std::uint32_t stride = set.row_stride();
  for (std::size_t t = 0; t < kTables; ++t) {
    const std::uint64_t first = shapes[t].row_offsets[static_cast<std::size_t>(rank)];
    EXPECT_EQ(set.local_rows(t).size(),
              (shapes[t].row_offsets[static_cast<std::size_t>(rank) + 1] - first) * stride);
    const std::span<float> mine = set.local_rows(t);
    for (std::size_t k = 0; k < mine.size() / stride; ++k)
      for (std::uint32_t e = 0; e < shapes[t].dim; ++e) mine[k * stride + e] += 2.0f;
  }
  set.local_rows_changed();
  for (std::size_t t = 0; t < kTables; ++t)
    for (float& v : ref.tables[t]) v += 2.0f;  // every rank did the same to its rows
  ctx.quiesce();
  EXPECT_EQ(first_mismatch(all, lookup_all(set, all), ref), "");
  ctx.quiesce();
}

// Every rank sends an out-of-range id in a different table (rank r: table r + 1, one past its
// last row) among valid ids of the other tables: every rank gets NS_ERR_INVALID naming the
// table and the id, its output untouched, the push refused too; afterwards no row of any table
// changed on any rank.
TEST_F(EmbeddingTablesMpi, OutOfRangeIdOfAnyTableIsRefusedOnEveryRankAndWritesNothing) {
  EmbeddingTables set(ctx, shapes, EmbeddingOptions{64, true});
  fill_local(set, shapes, rank);
  ctx.quiesce();
  const Reference ref(shapes);
  const std::size_t bad_table = static_cast<std::size_t>(rank) + 1;
  const std::uint64_t bad_id = shapes[bad_table].row_offsets.back();
  auto ids = batches(rank, 0, shapes);
  ids[bad_table].insert(ids[bad_table].begin() + 3, bad_id);
  std::vector<std::vector<float>> out(kTables);
  std::vector<std::span<const std::uint64_t>> id_spans;
  std::vector<std::span<float>> out_spans;
  std::vector<std::vector<float>> g(kTables);
  std::vector<std::span<const float>> g_spans;
  for (std::size_t t = 0; t < kTables; ++t) {
    out[t].assign(ids[t].size() * shapes[t].dim, 99.0f);
    g[t].assign(ids[t].size() * shapes[t].dim, 1.0f);
    id_spans.emplace_back(ids[t]);
    out_spans.emplace_back(out[t]);
    g_spans.emplace_back(g[t]);
  }
  std::string lookup_error, push_error;
  try {
    set.lookup(id_spans, out_spans);
  } catch (const netsparse::Error& e) {
    if (e.status() == NS_ERR_INVALID) lookup_error = e.what();
  }
  try {
    set.push_gradients(id_spans, g_spans);
  } catch (const netsparse::Error& e) {
    if (e.status() == NS_ERR_INVALID) push_error = e.what();
  }
  const std::string named =
      "table " + std::to_string(bad_table) + ": id " + std::to_string(bad_id) + " at position 3";
  EXPECT_NE(lookup_error.find(named), std::string::npos) << lookup_error;
  EXPECT_NE(push_error.find(named), std::string::npos) << push_error;
  for (std::size_t t = 0; t < kTables; ++t)
    for (const float v : out[t]) ASSERT_EQ(v, 99.0f) << "table " << t << ": written";
  // Wrong list counts and output sizes are refused too.
  EXPECT_THROW(set.lookup(std::span(id_spans).first(kTables - 1), out_spans), netsparse::Error);
  out_spans[0] = std::span<float>(out[0]).first(0);
  EXPECT_THROW(set.lookup(id_spans, out_spans), netsparse::Error);
  EXPECT_THROW((void)set.dim(kTables), netsparse::Error);
  ctx.quiesce();
  const auto all = every_row(shapes);
  const bool unchanged = first_mismatch(all, lookup_all(set, all), ref).empty();
  ctx.quiesce();  // every peer's lookups served before the MPI reduction
  EXPECT_TRUE(all_ranks(unchanged));
  ctx.quiesce();
}

// Ranks that disagree on a table's dim (the widest dim, hence the region's row, the same) all
// refuse with NS_ERR_INVALID; so do ranks that disagree on the number of tables.
TEST_F(EmbeddingTablesMpi, RanksThatDisagreeOnTheTablesAllRefuse) {
  std::vector<EmbeddingTableShape> mine = shapes;
  if (rank == size - 1) mine[5].dim = mine[5].dim == 3 ? 4 : 3;
  bool refused = false;
  try {
    EmbeddingTables set(ctx, mine);
  } catch (const netsparse::Error& e) {
    refused = e.status() == NS_ERR_INVALID &&
              std::string(e.what()).find("disagree on the tables") != std::string::npos;
  }
  EXPECT_TRUE(all_ranks(refused));  // (no region is registered now: MPI may wait)
  EXPECT_THROW(EmbeddingTables(ctx, std::vector<EmbeddingTableShape>{}), netsparse::Error);
  std::vector<EmbeddingTableShape> zero_dim = shapes;
  zero_dim[2].dim = 0;
  EXPECT_THROW(EmbeddingTables(ctx, zero_dim), netsparse::Error);
  // Still usable: a set of the agreed shapes registers afterwards.
  EmbeddingTables set(ctx, shapes);
  EXPECT_EQ(set.count(), kTables);
  ctx.quiesce();
}

// Reuse-aware admission across tables: with a cache of 16 rows, a lookup of every row of every
// table where 4 remote rows of each of tables 22 and 23 are announced leaves exactly those 8
// cached (the early tables' rows fill the cache first; the announced ones evict them, nothing
// else enters once it is full), whatever combined ids the tables' rows map to. Announcements
// of the wrong number of tables or with an id out of a table's range are refused.
TEST_F(EmbeddingTablesMpi, AnnouncedRowsOfEachTableStayCached) {
  EmbeddingOptions options{16, true};
  options.admission = netsparse::CacheAdmission::kUpcoming;
  EmbeddingTables set(ctx, shapes, options);
  fill_local(set, shapes, rank);
  ctx.quiesce();
  const Reference ref(shapes);
  std::vector<std::vector<std::uint64_t>> announced(kTables);
  for (const std::size_t t : {std::size_t{22}, std::size_t{23}}) {
    const auto& o = shapes[t].row_offsets;
    for (std::uint64_t id = 0; id < o.back() && announced[t].size() < 4; ++id) {
      if (id < o[static_cast<std::size_t>(rank)] || id >= o[static_cast<std::size_t>(rank) + 1])
        announced[t].push_back(id);  // a remote row of table t
    }
  }
  std::vector<std::span<const std::uint64_t>> spans(announced.begin(), announced.end());
  set.announce_upcoming(spans);
  const auto all = every_row(shapes);
  EXPECT_EQ(first_mismatch(all, lookup_all(set, all), ref), "");
  set.reset_stats();
  EXPECT_EQ(first_mismatch(announced, lookup_all(set, announced), ref), "");
  EXPECT_EQ(set.stats().cache_hits, announced[22].size() + announced[23].size());
  EXPECT_EQ(set.stats().fetched_rows, 0u);
  // Refused: one list short; table 5's id at its row count (named).
  EXPECT_THROW(set.announce_upcoming(std::span(spans).first(kTables - 1)), netsparse::Error);
  std::vector<std::uint64_t> bad = {0, shapes[5].row_offsets.back()};
  spans[5] = bad;
  try {
    set.announce_upcoming(spans);
    ADD_FAILURE() << "an out-of-range id was announced";
  } catch (const netsparse::Error& e) {
    EXPECT_NE(std::string(e.what()).find("table 5"), std::string::npos) << e.what();
  }
  ctx.quiesce();
}
