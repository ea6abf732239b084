// Embedding-exchange benchmark (DLRM-style): training samples of Zipf-distributed ids looked up
// in a row-partitioned embedding table, batches formed at random or by similarity
// (netsparse::SimilarityBatcher), several iterations with gradient updates, every mode side by
// side in one run, medians over --rounds.
//
//   mpirun -np P bench_embedding [--alpha 0.8,1.0,1.2] [--rows-per-rank N] [--dim D]
//                                [--batch N] [--iterations N] [--update-every N]
//                                [--cache-rows N] [--bucket-rows N] [--modes LIST] [--rounds 3]
//                                [--ids-per-sample K] [--locality L] [--communities C]
//                                [--epoch-batches E] [--refresh-batches R]
//                                [--signature-hashes H] [--lookahead N] [--json PATH]
//
// Modes: cached (netsparse::EmbeddingTable with its LRU cache of remote rows, validated by
// per-bucket versions), frozen (the same with no updates: the cache's ceiling), dedup (the same
// without the cache: each distinct id of a batch fetched once), plain (one RIG gather of every
// lookup as it comes), allgather (MPI_Allgatherv of the whole table whenever it changed, then
// local copies); each over random batches, or with "-sim" over similarity batches, and
// "cached-sim-admit" with reuse-aware admission (only rows of the next --lookahead batches
// enter the cache). Every lookup of every mode is checked against a sequential reference of
// the whole table (exit 1 if any differs). Ranks wait for each other with ns_quiesce, never an MPI
// barrier: with INLINE progress (the default on 2 cores) a rank in MPI_Barrier would not serve
// its peers' gathers. Exit 0 when every mode agreed, 2 on a bad option.
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "cli.hpp"
#include "netsparse/embedding.hpp"
#include "netsparse/netsparse_mpi.h"
#include "report.hpp"
#include "stats.hpp"

namespace cli = netsparse::bench::cli;  // the command-line interface (cli.hpp)

namespace {

namespace nb = netsparse::bench;
using nb::Json;
using nb::median;

const char* kHelp =
    R"help(bench_embedding: a DLRM-style embedding exchange -- training samples of Zipf ids looked
up in a table partitioned by rows over the ranks, gradient updates every few iterations -- with
NetSparse's cached embedding table (random or similarity batches, LRU or reuse-aware admission)
beside a de-duplicated gather, a plain gather and an allgather of the table.

usage: mpirun -np P bench_embedding [options]

  --alpha LIST         Zipf exponents of the lookups, comma-separated, each in [0.5, 2]
                       (default 1.0)
  --rows-per-rank N    table rows each rank owns (default 262144)
  --dim D              floats per row, 16-128 (64-512 B rows; default 32)
  --batch N            lookups per rank per iteration (default 16384), rounded down to whole
                       samples
  --iterations N       iterations per round (default 16)
  --update-every N     push gradients every N iterations (0: never; default 4)
  --cache-rows N       remote rows the cache holds (default 65536)
  --bucket-rows N      rows per version bucket, a power of two (default 16)
  --modes LIST         of plain,dedup,cached,frozen,allgather (random batches), plain-sim,
                       dedup-sim,cached-sim,frozen-sim (similarity batches), cached-sim-admit
                       (similarity batches, reuse-aware admission); default plain,dedup,
                       cached,frozen,dedup-sim,cached-sim,cached-sim-admit,frozen-sim;
                       frozen = cached with no updates (lookups only: the cache's ceiling)
  --ids-per-sample K   ids of one training sample (default 16)
  --locality L         in [0, 1]: the fraction of a sample's ids drawn from its community's
                       own Zipf ranking (the rest from the global one; default 0.5)
  --communities C      communities of samples, each with its own hot rows (default 64)
  --epoch-batches E    batches per epoch: each rank's samples (default 16)
  --refresh-batches R  similarity batches re-bucketed every R batches (0: each epoch; default 4)
  --signature-hashes H min-hash functions per signature, 1-16 (default 2)
  --lookahead N        batches announced ahead for reuse-aware admission, 1-8 (default 1)
  --rounds N           rounds of every mode; figures are medians over them (default 3)
  --json PATH          also write every record as JSON (rank 0)
  --help               this text

Per mode: time per iteration (lookups + updates; the slowest rank's) and its ratio to plain
(median over rounds; "best x": plain's fastest round over the mode's fastest),
lookup time per iteration and its ratio to plain's lookups, hit rate (distinct remote ids
served from the cache), rows fetched and bytes a rank sent per iteration (RIG modes: the
engine's frames, version reads and updates included; updates' scatter bytes also separately;
allgather: (P-1) x its block per allgather, a lower bound, "*"). A second table per alpha:
version rows and words gathered, cached rows refused as stale, bucket versions bumped per
iteration, and where a lookup's time goes (de-duplication, version gather, cache finds, miss
gather, output and cache inserts; mean over ranks).

Samples: each rank has E x (batch / K) samples of K ids; sample s of rank r belongs to community
(a hash of r, s) mod C; each id is, with probability L, Zipf(alpha) over its community's
ranking of the rows (another scattering of the table per community), else Zipf(alpha) over the
global ranking. Batches: random (a uniform permutation of the samples per epoch) or similarity
(SimilarityBatcher: min-hash signatures, LSH buckets, refreshed every R batches); "batcher ms"
is the time to form one batch on one rank (not in the iteration times: a data loader forms
batches ahead).

Exit codes: 0 every mode agreed with the reference, 1 a mode differed, 2 a bad option.
)help";

const std::vector<std::string> kModes = {
    "plain",     "dedup",     "cached",     "frozen",           "allgather",
    "plain-sim", "dedup-sim", "cached-sim", "cached-sim-admit", "frozen-sim"};
const std::vector<std::string> kDefaultModes = {
    "plain",     "dedup",      "cached",           "frozen",
    "dedup-sim", "cached-sim", "cached-sim-admit", "frozen-sim"};

// What a mode name means: the lookup method, the batches and the admission.
struct ModeSpec {
  std::string kind;  // plain, dedup, cached, frozen, allgather
  bool similarity = false, admit = false;
};
ModeSpec spec_of(const std::string& mode) {
  ModeSpec m;
  const std::size_t dash = mode.find('-');
  m.kind = mode.substr(0, dash);
  m.similarity = dash != std::string::npos;
  m.admit = mode.ends_with("-admit");
  return m;
}

struct Args {
  std::vector<double> alphas = {1.0};
  std::uint64_t rows_per_rank = 262144;
  std::uint32_t dim = 32;
  std::uint64_t batch = 16384;
  int iterations = 16;
  int update_every = 4;
  std::uint64_t cache_rows = 65536;
  std::uint32_t bucket_rows = netsparse::EmbeddingOptions::kDefaultBucketRows;
  std::vector<std::string> modes = kDefaultModes;
  int rounds = 3;
  std::uint32_t ids_per_sample = 16;
  double locality = 0.5;
  std::uint32_t communities = 64;
  int epoch_batches = 16;
  std::uint32_t refresh_batches = 4;
  std::uint32_t signature_hashes = 2;
  int lookahead = 1;
  std::string json;
};

int parse(int argc, char** argv, int rank, Args& a) {
  cli::App app{"bench_embedding"};
  app.add_option_function<std::string>("--alpha", [&](const std::string& v) {
    a.alphas = nb::positive_list("--alpha", v);
    for (double x : a.alphas) {
      if (x < 0.5 || x > 2) throw cli::ValidationError("--alpha", "each alpha in [0.5, 2]");
    }
  });
  app.add_option("--rows-per-rank", a.rows_per_rank)
      ->check(cli::Range(std::uint64_t{1}, std::uint64_t{1} << 28));
  app.add_option("--dim", a.dim)->check(cli::Range(16u, 128u));
  app.add_option("--batch", a.batch)->check(cli::Range(std::uint64_t{1}, std::uint64_t{1} << 22));
  app.add_option("--iterations", a.iterations)->check(cli::Range(1, 100000));
  app.add_option("--update-every", a.update_every)->check(cli::Range(0, 100000));
  app.add_option("--cache-rows", a.cache_rows)
      ->check(cli::Range(std::uint64_t{0}, std::uint64_t{1} << 31));
  app.add_option("--bucket-rows", a.bucket_rows)
      ->check(cli::Range(1u, 1u << 20))
      ->check([](const std::string& v) {
        const unsigned long b = std::stoul(v);
        return (b & (b - 1)) == 0 ? std::string() : std::string("a power of two");
      });
  app.add_option_function<std::string>(
      "--modes", [&](const std::string& v) { a.modes = nb::member_list("--modes", v, kModes); });
  app.add_option("--rounds", a.rounds)->check(cli::Range(1, 1000));
  app.add_option("--ids-per-sample", a.ids_per_sample)->check(cli::Range(1u, 4096u));
  app.add_option("--locality", a.locality)->check(cli::Range(0.0, 1.0));
  app.add_option("--communities", a.communities)->check(cli::Range(1u, 1u << 20));
  app.add_option("--epoch-batches", a.epoch_batches)->check(cli::Range(1, 100000));
  app.add_option("--refresh-batches", a.refresh_batches)->check(cli::Range(0u, 100000u));
  app.add_option("--signature-hashes", a.signature_hashes)->check(cli::Range(1u, 16u));
  app.add_option("--lookahead", a.lookahead)->check(cli::Range(1, 8));
  app.add_option("--json", a.json);
  const int code = nb::finish_command_line(nb::parse_command_line(app, argc, argv),
                                           "bench_embedding", kHelp, rank == 0);
  if (code < 0 && a.batch < a.ids_per_sample) {
    if (rank == 0) {
      std::fprintf(stderr,
                   "bench_embedding: --batch %llu is smaller than --ids-per-sample %u "
                   "(a batch holds whole samples; see --help)\n",
                   static_cast<unsigned long long>(a.batch), a.ids_per_sample);
    }
    return 2;
  }
  return code;
}

// Exact in fp32 (quarters of small integers), so every order of the sums gives the same bits.
float initial(std::uint64_t id, std::uint32_t e) {
  return static_cast<float>(static_cast<int>((id * 31 + e * 7) % 64) - 32) * 0.25f;
}
float delta(std::uint64_t id, std::uint32_t e, int iteration) {
  return static_cast<float>(static_cast<int>((id * 5 + e * 3 + iteration * 11) % 9) - 4) * 0.25f;
}

// Zipf(alpha) popularity ranks over the table's rows: rank k (0 = hottest) drawn from the CDF;
// a ranking scatters them over the whole table by a fixed bijection (k * stride + shift mod N),
// as hashed ids are, so the hot rows belong to every rank. The global ranking has shift 0;
// community c's ranking is shifted, so each community has hot rows of its own.
class ZipfIds {
 public:
  ZipfIds(std::uint64_t n, double alpha) : n_(n), cdf_(n) {
    double sum = 0;
    for (std::uint64_t k = 0; k < n; ++k)
      cdf_[k] = sum += std::pow(static_cast<double>(k + 1), -alpha);
    for (double& c : cdf_) c /= sum;
    stride_ = 0x9E3779B97F4A7C15ull % n_ | 1;
    while (std::gcd(stride_, n_) != 1) stride_ += 2;
  }
  std::uint64_t draw(double u, std::uint64_t shift) const {
    const auto k =
        static_cast<std::uint64_t>(std::lower_bound(cdf_.begin(), cdf_.end(), u) - cdf_.begin());
    return static_cast<std::uint64_t>(
        ((static_cast<unsigned __int128>(std::min(k, n_ - 1)) + shift) * stride_) % n_);
  }
  std::uint64_t rows() const { return n_; }

 private:
  std::uint64_t n_, stride_ = 1;
  std::vector<double> cdf_;
};

// One rank's training samples: samples() samples of K ids each (sample s: ids[s * K .. )).
std::vector<std::uint64_t> make_samples(const ZipfIds& zipf, const Args& args, int rank,
                                        std::size_t samples) {
  const std::uint32_t k = args.ids_per_sample;
  std::vector<std::uint64_t> ids(samples * k);
  std::uniform_real_distribution<double> u(0, 1);
  const std::uint64_t n = zipf.rows();
  for (std::size_t s = 0; s < samples; ++s) {
    std::mt19937_64 rng(0x5EEDull + 1000003ull * static_cast<std::uint64_t>(rank) + 7919ull * s);
    const std::uint64_t community = rng() % args.communities;
    const std::uint64_t shift = (community + 1) * (n / (args.communities + 1));
    for (std::uint32_t j = 0; j < k; ++j) {
      const bool own = u(rng) < args.locality;
      ids[s * k + j] = zipf.draw(u(rng), own ? shift : 0);
    }
  }
  return ids;
}

// The batches of one batching (random or similarity) for every iteration: this rank's ids,
// and every rank's ids of the iterations that push (the reference applies them all).
struct Batches {
  std::vector<std::vector<std::uint64_t>> mine;
  std::vector<std::vector<std::uint64_t>> everyone;  // per iteration; empty when no push
  double batcher_ms = 0;                             // per batch, this rank
  double distinct = 0;                               // distinct ids per batch, mean over ranks
};

Batches make_batches(const Args& args, int rank, const std::vector<std::uint64_t>& sample_ids,
                     std::size_t samples, bool similarity) {
  const std::uint32_t k = args.ids_per_sample;
  std::vector<std::uint64_t> offsets(samples + 1);
  for (std::size_t s = 0; s <= samples; ++s) offsets[s] = s * k;
  netsparse::SimilarityBatchingOptions o;
  o.batch_samples = args.batch / k;
  o.signature_hashes = args.signature_hashes;
  o.refresh_batches = args.refresh_batches;
  o.seed = 0xB47C4ull + static_cast<std::uint64_t>(rank);
  o.similarity = similarity;
  netsparse::SimilarityBatcher batcher(offsets, sample_ids, o);
  Batches b;
  const double t0 = MPI_Wtime();
  for (int it = 0; it < args.iterations + args.lookahead; ++it) {
    std::vector<std::uint64_t> ids;
    for (const std::uint32_t s : batcher.next_batch())
      ids.insert(ids.end(), sample_ids.begin() + static_cast<std::ptrdiff_t>(s * k),
                 sample_ids.begin() + static_cast<std::ptrdiff_t>((s + 1) * k));
    b.mine.push_back(std::move(ids));
  }
  b.batcher_ms = 1e3 * (MPI_Wtime() - t0) / (args.iterations + args.lookahead);
  double distinct = 0;
  for (int it = 0; it < args.iterations; ++it) {
    std::vector<std::uint64_t> d = b.mine[static_cast<std::size_t>(it)];
    std::sort(d.begin(), d.end());
    distinct += static_cast<double>(std::unique(d.begin(), d.end()) - d.begin());
  }
  int P = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  b.distinct = nb::reduce_over_ranks(distinct, MPI_SUM) / P / args.iterations;
  // Every rank's ids of the pushing iterations (collective; no RIG operation is in flight).
  b.everyone.resize(static_cast<std::size_t>(args.iterations));
  for (int it = 0; it < args.iterations; ++it) {
    if (args.update_every == 0 || (it + 1) % args.update_every != 0) continue;
    const std::vector<std::uint64_t>& mine = b.mine[static_cast<std::size_t>(it)];
    const int count = static_cast<int>(mine.size());
    std::vector<int> counts(static_cast<std::size_t>(P)), displs(static_cast<std::size_t>(P));
    MPI_Allgather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, MPI_COMM_WORLD);
    for (int p = 1; p < P; ++p) displs[p] = displs[p - 1] + counts[p - 1];
    std::vector<std::uint64_t>& all = b.everyone[static_cast<std::size_t>(it)];
    all.resize(static_cast<std::size_t>(displs[P - 1] + counts[P - 1]));
    MPI_Allgatherv(mine.data(), count, MPI_UINT64_T, all.data(), counts.data(), displs.data(),
                   MPI_UINT64_T, MPI_COMM_WORLD);
  }
  return b;
}

// Where a lookup's time goes (EmbeddingStats' phases), ms per iteration, mean over ranks.
constexpr int kPhases = 5;
const char* const kPhaseNames[kPhases] = {"dedup", "versions", "cache", "gather", "output"};

struct Record {
  double alpha = 0;
  std::string mode;
  std::vector<double> iter_times, lookup_times;
  std::vector<double> phase_ms[kPhases];
  double hit_rate = 0, fetched_rows = 0, distinct = 0, lookup_bytes = 0, update_bytes = 0;
  // Per rank and iteration (first round): version rows / words read, cached rows
  // refused as stale, bucket versions bumped and the hidden rows that carried the bumps.
  double version_rows = 0, version_words = 0, stale = 0, bumped = 0, bump_rows = 0;
  // Rows admitted into / declined by the cache per rank and iteration; the batches' distinct
  // ids and the batcher's ms per batch (the mode's batching).
  double admitted = 0, declined = 0, batch_distinct = 0, batcher_ms = 0;
  bool bytes_modelled = false;
  bool agrees = true;
};

struct Job {
  int rank = 0, P = 1;
  netsparse::Context ctx;
  std::vector<std::uint64_t> offsets;
  bool all_agree = true;
};

// One round of one mode: every rank's iterations, checked; returns (iteration s, lookup s) of
// the slowest rank and fills the per-iteration counters of `r` (first round only).
void run_round(Job& job, const Args& args, const Batches& batches, netsparse::EmbeddingTable& table,
               const std::vector<float>& initial_table, Record& r, bool first_round) {
  const std::uint32_t dim = args.dim;
  const std::uint64_t total = job.offsets.back();
  const ModeSpec spec = spec_of(r.mode);
  const std::string& mode = spec.kind;
  // Reset: this rank's rows to their initial values; caches dropped.
  const std::span<float> mine = table.local_rows();
  const std::uint64_t first = job.offsets[static_cast<std::size_t>(job.rank)];
  std::copy_n(initial_table.begin() + static_cast<std::ptrdiff_t>(first * dim), mine.size(),
              mine.begin());
  const bool caches = mode == "cached" || mode == "frozen";
  netsparse::EmbeddingOptions options{caches ? args.cache_rows : 0, mode != "plain",
                                      args.bucket_rows};
  if (spec.admit) options.admission = netsparse::CacheAdmission::kUpcoming;
  table.set_options(options);
  job.ctx.quiesce();
  table.local_rows_changed();
  job.ctx.quiesce();
  table.reset_stats();
  job.ctx.stats_reset();
  std::vector<float> reference = initial_table, replica;
  std::vector<int> counts, displs;
  for (int p = 0; p < job.P; ++p) {
    counts.push_back(static_cast<int>((job.offsets[p + 1] - job.offsets[p]) * dim));
    displs.push_back(static_cast<int>(job.offsets[p] * dim));
  }
  if (mode == "allgather") replica.resize(total * dim);
  bool replica_stale = true;
  double iter_s = 0, lookup_s = 0, allgathers = 0;
  std::uint64_t scatter_bytes = 0;
  bool ok = true;
  std::vector<std::uint64_t> upcoming;
  for (int it = 0; it < args.iterations; ++it) {
    const std::vector<std::uint64_t>& ids = batches.mine[static_cast<std::size_t>(it)];
    std::vector<float> out(ids.size() * dim);
    if (spec.admit) {
      // The batches the loader has already formed (untimed: the caller's data).
      upcoming.clear();
      for (int a = 1; a <= args.lookahead; ++a) {
        const std::vector<std::uint64_t>& next = batches.mine[static_cast<std::size_t>(it + a)];
        upcoming.insert(upcoming.end(), next.begin(), next.end());
      }
    }
    const bool update =
        mode != "frozen" && args.update_every > 0 && (it + 1) % args.update_every == 0;
    std::vector<float> grads;
    if (update) {
      grads.resize(ids.size() * dim);
      for (std::size_t j = 0; j < ids.size(); ++j)
        for (std::uint32_t e = 0; e < dim; ++e) grads[j * dim + e] = delta(ids[j], e, it);
    }
    job.ctx.quiesce();
    const double t0 = MPI_Wtime();
    if (spec.admit) table.announce_upcoming(upcoming);  // timed: the table's work
    if (mode == "allgather") {
      if (replica_stale) {
        MPI_Allgatherv(mine.data(), counts[static_cast<std::size_t>(job.rank)], MPI_FLOAT,
                       replica.data(), counts.data(), displs.data(), MPI_FLOAT, MPI_COMM_WORLD);
        replica_stale = false;
        ++allgathers;
      }
      for (std::size_t j = 0; j < ids.size(); ++j)
        std::memcpy(out.data() + j * dim, replica.data() + ids[j] * dim, dim * sizeof(float));
    } else {
      table.lookup(ids, out);
    }
    const double t1 = MPI_Wtime();
    if (update) {
      const std::uint64_t before = job.ctx.stat(NS_STAT_SCATTER_BYTES);
      job.ctx.quiesce();  // every rank's lookups done before rows change (the reference's order)
      table.push_gradients(ids, grads);
      scatter_bytes += job.ctx.stat(NS_STAT_SCATTER_BYTES) - before;
      job.ctx.quiesce();  // every update in before anyone looks up again
      replica_stale = true;
    }
    iter_s += MPI_Wtime() - t0;
    lookup_s += t1 - t0;
    // Check (untimed): every byte of this rank's lookups; then the reference takes every rank's
    // updates of this iteration.
    for (std::size_t j = 0; j < ids.size() && ok; ++j)
      ok = std::memcmp(out.data() + j * dim, reference.data() + ids[j] * dim,
                       dim * sizeof(float)) == 0;
    if (update) {
      for (const std::uint64_t id : batches.everyone[static_cast<std::size_t>(it)])
        for (std::uint32_t e = 0; e < dim; ++e) reference[id * dim + e] += delta(id, e, it);
    }
  }
  job.ctx.quiesce();  // every peer's lookups served before the MPI reductions below
  r.iter_times.push_back(nb::max_over_ranks(iter_s) / args.iterations);
  r.lookup_times.push_back(nb::max_over_ranks(lookup_s) / args.iterations);
  int mine_ok = ok ? 1 : 0, all_ok = 0;
  MPI_Allreduce(&mine_ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  r.agrees = r.agrees && all_ok == 1;
  const netsparse::EmbeddingStats s = table.stats();
  const double its = args.iterations;
  const auto avg = [&](double v) { return nb::reduce_over_ranks(v, MPI_SUM) / job.P / its; };
  const std::uint64_t phase_ns[kPhases] = {s.dedup_ns, s.version_ns, s.cache_ns, s.gather_ns,
                                           s.output_ns};
  for (int f = 0; f < kPhases; ++f)
    r.phase_ms[f].push_back(1e-6 * avg(static_cast<double>(phase_ns[f])));
  if (!first_round) return;
  const double remote = static_cast<double>(s.distinct - s.local_rows);
  r.hit_rate = nb::reduce_over_ranks(static_cast<double>(s.cache_hits), MPI_SUM) /
               std::max(1.0, nb::reduce_over_ranks(remote, MPI_SUM));
  r.distinct = avg(static_cast<double>(s.distinct));
  r.fetched_rows = avg(static_cast<double>(s.fetched_rows));
  r.update_bytes = avg(static_cast<double>(scatter_bytes));
  r.version_rows = avg(static_cast<double>(s.version_rows));
  r.version_words = avg(static_cast<double>(s.version_words));
  r.stale = avg(static_cast<double>(s.cache_stale));
  r.bumped = avg(static_cast<double>(s.bumped_buckets));
  r.bump_rows = avg(static_cast<double>(s.bump_rows));
  r.admitted = avg(static_cast<double>(s.cache_admitted));
  r.declined = avg(static_cast<double>(s.cache_declined));
  r.batch_distinct = batches.distinct;
  r.batcher_ms = nb::max_over_ranks(batches.batcher_ms);
  if (mode == "allgather") {
    const double block = static_cast<double>(mine.size()) * sizeof(float);
    r.lookup_bytes = avg(allgathers * (job.P - 1) * block);
    r.bytes_modelled = true;
  } else {
    r.lookup_bytes = avg(static_cast<double>(job.ctx.stat(NS_STAT_MOVED_BYTES)));
  }
}

Json report(const Job& job, const Args& args, const std::vector<Record>& records, double load1) {
  Json doc;
  doc["bench"] = "embedding";
  doc["np"] = job.P;
  doc["transport"] = job.ctx.transport_name();
  doc["loadavg_1min"] = load1;
  doc["rows_per_rank"] = args.rows_per_rank;
  doc["dim"] = args.dim;
  doc["row_bytes"] = args.dim * 4;
  doc["batch"] = args.batch;
  doc["iterations"] = args.iterations;
  doc["update_every"] = args.update_every;
  doc["cache_rows"] = args.cache_rows;
  doc["bucket_rows"] = args.bucket_rows;
  doc["rounds"] = args.rounds;
  doc["ids_per_sample"] = args.ids_per_sample;
  doc["locality"] = args.locality;
  doc["communities"] = args.communities;
  doc["epoch_batches"] = args.epoch_batches;
  doc["refresh_batches"] = args.refresh_batches;
  doc["signature_hashes"] = args.signature_hashes;
  doc["lookahead"] = args.lookahead;
  Json& out = doc["records"] = Json::array();
  for (const Record& r : records) {
    Json phases;
    for (int f = 0; f < kPhases; ++f) phases[kPhaseNames[f]] = median(r.phase_ms[f]);
    out.push_back({{"alpha", r.alpha},
                   {"mode", r.mode},
                   {"iteration_s", median(r.iter_times)},
                   {"iteration_times_s", r.iter_times},
                   {"lookup_s", median(r.lookup_times)},
                   {"hit_rate", r.hit_rate},
                   {"distinct_per_iteration", r.distinct},
                   {"fetched_rows_per_iteration", r.fetched_rows},
                   {"lookup_bytes_per_rank_iteration", r.lookup_bytes},
                   {"update_bytes_per_rank_iteration", r.update_bytes},
                   {"bytes_modelled", r.bytes_modelled},
                   {"version_rows_per_iteration", r.version_rows},
                   {"version_words_per_iteration", r.version_words},
                   {"version_bytes_per_rank_iteration", r.version_rows * args.dim * 4},
                   {"stale_per_iteration", r.stale},
                   {"bumped_buckets_per_iteration", r.bumped},
                   {"bump_rows_per_iteration", r.bump_rows},
                   {"admitted_per_iteration", r.admitted},
                   {"declined_per_iteration", r.declined},
                   {"batch_distinct_ids", r.batch_distinct},
                   {"batcher_ms_per_batch", r.batcher_ms},
                   {"lookup_phase_ms", phases},
                   {"agrees", r.agrees}});
  }
  return doc;
}

void print_alpha(const Job& job, const Args& args, const std::vector<Record>& records,
                 double alpha) {
  if (job.rank != 0) return;
  std::printf(
      "alpha %.2f  np %d  rows/rank %llu  dim %u (%u B)  batch %llu  iterations %d  "
      "update every %d  cache %llu rows  bucket %u rows\n"
      "    samples of %u ids, locality %.2f over %u communities, epoch %d batches, refresh "
      "every %u, %u min-hashes, lookahead %d\n",
      alpha, job.P, static_cast<unsigned long long>(args.rows_per_rank), args.dim, args.dim * 4,
      static_cast<unsigned long long>(args.batch / args.ids_per_sample * args.ids_per_sample),
      args.iterations, args.update_every, static_cast<unsigned long long>(args.cache_rows),
      args.bucket_rows, args.ids_per_sample, args.locality, args.communities, args.epoch_batches,
      args.refresh_batches, args.signature_hashes, args.lookahead);
  const Record* plain = nullptr;
  for (const Record& r : records)
    if (r.alpha == alpha && r.mode == "plain") plain = &r;
  // "best x": plain's fastest round over this mode's fastest (the least disturbed rounds; on a
  // loaded machine the medians compare rounds that met different interference).
  const auto best = [](const std::vector<double>& v) {
    return *std::min_element(v.begin(), v.end());
  };
  std::printf("    %-16s %10s %10s %8s %8s %8s %8s %10s %10s %14s %12s\n", "mode", "ms/iter",
              "lookup ms", "x plain", "best x", "lookup x", "hit rate", "distinct", "fetched",
              "lookup B/rank", "update B");
  for (const Record& r : records) {
    if (r.alpha != alpha) continue;
    const double t = median(r.iter_times), l = median(r.lookup_times);
    std::printf(
        "    %-16s %10.3f %10.3f %8.2f %8.2f %8.2f %8.3f %10.0f %10.0f %14.0f%s %12.0f  %s\n",
        r.mode.c_str(), 1e3 * t, 1e3 * l, plain != nullptr ? median(plain->iter_times) / t : 0.0,
        plain != nullptr ? best(plain->iter_times) / best(r.iter_times) : 0.0,
        plain != nullptr ? median(plain->lookup_times) / l : 0.0, r.hit_rate, r.distinct,
        r.fetched_rows, r.lookup_bytes, r.bytes_modelled ? "*" : " ", r.update_bytes,
        r.agrees ? "agrees" : "DIFFERS");
  }
  std::printf("    %-16s %9s %9s %9s %9s %9s %9s %9s %9s %9s |", "mode", "batch ids", "batcher ms",
              "ver rows", "ver words", "stale", "bumped", "bump rows", "admitted", "declined");
  for (const char* name : kPhaseNames) std::printf(" %8s", name);
  std::printf("  (per rank and iteration; phases in ms)\n");
  for (const Record& r : records) {
    if (r.alpha != alpha || r.mode == "allgather") continue;
    std::printf("    %-16s %9.0f %9.3f %9.0f %9.0f %9.0f %9.0f %9.0f %9.0f %9.0f |", r.mode.c_str(),
                r.batch_distinct, r.batcher_ms, r.version_rows, r.version_words, r.stale, r.bumped,
                r.bump_rows, r.admitted, r.declined);
    for (const auto& phase : r.phase_ms) std::printf(" %8.3f", median(phase));
    std::printf("\n");
  }
  std::fflush(stdout);
}

int run_benchmark(Args& args, const nb::World& world) {
  Job job;
  job.rank = world.rank;
  job.P = world.size;
  if (job.rank == 0 && !args.json.empty()) {
    if (const std::string p = nb::json_path_problem(args.json); !p.empty()) {
      std::fprintf(stderr, "bench_embedding: %s\n", p.c_str());
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
  }
  std::vector<Record> records;
  try {
    job.ctx = netsparse::open_mpi(MPI_COMM_WORLD);
    for (int p = 0; p <= job.P; ++p) job.offsets.push_back(args.rows_per_rank * p);
    const std::uint64_t total = job.offsets.back();
    std::vector<float> initial_table(total * args.dim);
    for (std::uint64_t id = 0; id < total; ++id)
      for (std::uint32_t e = 0; e < args.dim; ++e)
        initial_table[id * args.dim + e] = initial(id, e);
    netsparse::EmbeddingTable table(job.ctx, args.dim, job.offsets,
                                    netsparse::EmbeddingOptions{0, true, args.bucket_rows});
    for (const double alpha : args.alphas) {
      const ZipfIds zipf(total, alpha);
      const std::size_t samples =
          static_cast<std::size_t>(args.epoch_batches) * (args.batch / args.ids_per_sample);
      const std::vector<std::uint64_t> sample_ids = make_samples(zipf, args, job.rank, samples);
      const Batches random_batches = make_batches(args, job.rank, sample_ids, samples, false);
      const Batches similar_batches = make_batches(args, job.rank, sample_ids, samples, true);
      std::vector<Record> mine(args.modes.size());
      for (int round = 0; round < args.rounds; ++round) {
        for (std::size_t m = 0; m < args.modes.size(); ++m) {
          mine[m].alpha = alpha;
          mine[m].mode = args.modes[m];
          run_round(job, args, spec_of(args.modes[m]).similarity ? similar_batches : random_batches,
                    table, initial_table, mine[m], round == 0);
        }
      }
      for (const Record& r : mine) job.all_agree = job.all_agree && r.agrees;
      records.insert(records.end(), mine.begin(), mine.end());
      print_alpha(job, args, records, alpha);
    }
    job.ctx.quiesce();  // nobody reads the table any more
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_embedding: rank %d: %s\n", job.rank, e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  if (job.rank == 0 && !args.json.empty()) {
    const std::string problem =
        nb::write_json(args.json, report(job, args, records, nb::load_average_1min()));
    if (!problem.empty()) std::fprintf(stderr, "bench_embedding: %s\n", problem.c_str());
  }
  job.ctx.close();
  return job.all_agree ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  return nb::run_job(argc, argv, parse, run_benchmark);
}
