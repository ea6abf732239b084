#include "agreement/agreement.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace netsparse::agreement {

namespace {

// Record layout: a header, then one slot per field (hash of the whole value + shown prefix).
struct Header {
  std::int32_t status;
  std::int32_t reason_bytes;
  char reason[Agreement::kReasonBytes];
};
struct Slot {
  std::uint64_t hash;
  char shown[Agreement::kShownBytes];
};

}  // namespace

std::uint64_t fnv1a(const void* data, std::size_t bytes, std::uint64_t h) noexcept {
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

void Agreement::refuse(std::int32_t status, std::string_view why) {
  if (status == 0) throw std::invalid_argument("Agreement::refuse: status 0 is not a refusal");
  if (refused()) return;  // the first reason wins
  status_ = status;
  reason_ = why;
}

void Agreement::field(std::string name, std::string value, bool show) {
  fields_.push_back(Field{std::move(name), std::move(value), show});
}

std::size_t Agreement::record_bytes() const noexcept {
  return sizeof(Header) + fields_.size() * sizeof(Slot);
}

std::uint64_t Agreement::digest() const noexcept {
  std::uint64_t h = fnv1a(nullptr, 0);
  for (const Field& f : fields_) {
    const std::uint64_t size = f.value.size();
    h = fnv1a(&size, sizeof size, h);
    h = fnv1a(f.value.data(), f.value.size(), h);
  }
  return h;
}

std::vector<std::byte> Agreement::record() const {
  std::vector<std::byte> out(record_bytes());
  Header head{};
  head.status = status_;
  const std::size_t n = std::min(reason_.size(), kReasonBytes);
  head.reason_bytes = static_cast<std::int32_t>(n);
  std::memcpy(head.reason, reason_.data(), n);
  std::memcpy(out.data(), &head, sizeof head);
  for (std::size_t i = 0; i < fields_.size(); ++i) {
    Slot s{};
    s.hash = fnv1a(fields_[i].value.data(), fields_[i].value.size());
    std::memcpy(s.shown, fields_[i].value.data(), std::min(fields_[i].value.size(), kShownBytes));
    std::memcpy(out.data() + sizeof(Header) + i * sizeof(Slot), &s, sizeof s);
  }
  return out;
}

Verdict Agreement::judge(std::span<const std::byte> all, int size) const {
  const std::size_t bytes = record_bytes();
  if (size < 1 || all.size() != bytes * static_cast<std::size_t>(size)) {
    throw std::invalid_argument("Agreement::judge: " + std::to_string(all.size()) +
                                " bytes are not " + std::to_string(size) + " records of " +
                                std::to_string(bytes));
  }
  const auto header = [&](int r) {
    Header h;
    std::memcpy(&h, all.data() + bytes * static_cast<std::size_t>(r), sizeof h);
    return h;
  };
  const auto slot = [&](int r, std::size_t i) {
    Slot s;
    std::memcpy(&s,
                all.data() + bytes * static_cast<std::size_t>(r) + sizeof(Header) + i * sizeof s,
                sizeof s);
    return std::string(s.shown, strnlen(s.shown, kShownBytes)) + "#" + std::to_string(s.hash);
  };
  Verdict v;
  for (int r = 0; r < size; ++r) {
    const Header h = header(r);
    if (h.status == 0) continue;
    v.refused = true;
    v.rank = r;
    v.status = h.status;
    v.what.assign(h.reason, static_cast<std::size_t>(h.reason_bytes));
    v.reason = "rank " + std::to_string(r) + ": " + v.what;
    return v;
  }
  for (std::size_t i = 0; i < fields_.size(); ++i) {
    const std::string first = slot(0, i);
    for (int r = 1; r < size; ++r) {
      const std::string other = slot(r, i);
      if (other == first) continue;
      const auto shown = [](const std::string& s) { return s.substr(0, s.rfind('#')); };
      v.rank = r;
      v.reason =
          "ranks disagree on " + fields_[i].name +
          (fields_[i].show ? ": rank 0 has " + shown(first) + ", rank " + std::to_string(r) +
                                 " has " + shown(other) + " (it must be the same on every rank)"
                           : " (rank 0 and rank " + std::to_string(r) +
                                 " differ; it must be the same on every rank)");
      return v;
    }
  }
  return v;
}

Verdict Agreement::settle(int size, const Allgather& allgather) const {
  const std::vector<std::byte> mine = record();
  std::vector<std::byte> all(mine.size() * static_cast<std::size_t>(std::max(size, 1)));
  allgather(mine.data(), mine.size(), all.data());
  return judge(all, size);
}

}  // namespace netsparse::agreement
