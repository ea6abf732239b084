// The one record every collective argument check uses: each rank states its refusal (if any)
// and the values that must be equal on every rank; one exchange later, every rank reaches the
// same verdict, so a refused or mismatched argument fails every rank with the same message
// instead of leaving some ranks waiting in the next collective. Transport-neutral: the caller
// supplies the allgather (MPI, Transport::allgather, ...); agreement/mpi.hpp settles over MPI.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace netsparse::agreement {

// What every rank concludes. ok() when no rank refused and every field agreed.
struct Verdict {
  bool refused = false;     // some rank refused (`status` is the lowest such rank's)
  int rank = -1;            // the lowest refusing rank, or the rank that differs from rank 0
  std::int32_t status = 0;  // the refusing rank's status (0 for a disagreement)
  std::string reason;       // "rank r: <its reason>" or "ranks disagree on <field>..."
  std::string what;         // the refusing rank's own reason, unprefixed
  [[nodiscard]] bool ok() const noexcept { return rank < 0; }
};

class Agreement {
 public:
  // Longest refusal reason carried (longer ones are cut; the refusing rank still has its own).
  static constexpr std::size_t kReasonBytes = 1024;
  // Longest value shown in a disagreement message (equality uses a hash of the whole value).
  static constexpr std::size_t kShownBytes = 56;

  // This rank refuses with `status` (nonzero) and a reason; the first refusal wins.
  void refuse(std::int32_t status, std::string_view why);
  [[nodiscard]] bool refused() const noexcept { return status_ != 0; }
  [[nodiscard]] const std::string& reason() const noexcept { return reason_; }

  // A value that must be the same on every rank. Every rank declares the same fields in the
  // same order (the same code path). `show` = false hides the values in the message (hashes,
  // long tables): it then names the two ranks only.
  void field(std::string name, std::string value, bool show = true);
  void field(std::string name, std::uint64_t value) {
    field(std::move(name), std::to_string(value));
  }

  // This rank's fixed-size record (the same size on every rank) and the verdict over every
  // rank's records, in rank order.
  [[nodiscard]] std::vector<std::byte> record() const;
  [[nodiscard]] std::size_t record_bytes() const noexcept;
  [[nodiscard]] Verdict judge(std::span<const std::byte> all, int size) const;

  // FNV-1a over the fields' values: equal on two ranks when every field is (the cheap first
  // round of settle_over_mpi).
  [[nodiscard]] std::uint64_t digest() const noexcept;

  // One exchange with `allgather(mine, bytes, all)` (all: size * bytes), then judge.
  using Allgather = std::function<void(const void* mine, std::size_t bytes, void* all)>;
  [[nodiscard]] Verdict settle(int size, const Allgather& allgather) const;

 private:
  struct Field {
    std::string name, value;
    bool show = true;
  };
  std::int32_t status_ = 0;
  std::string reason_;
  std::vector<Field> fields_;
};

// 64-bit FNV-1a, the hash of the record's values (also for tables passed as one field).
[[nodiscard]] std::uint64_t fnv1a(const void* data, std::size_t bytes,
                                  std::uint64_t h = 1469598103934665603ull) noexcept;

}  // namespace netsparse::agreement
