#include "rig/handles.hpp"
#include "support/enum_names.hpp"

#include <array>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>

namespace netsparse::rig {

namespace {
struct Entry {
  HandleKind kind;
  const void* owner;
};
struct Registry {
  std::shared_mutex mu;
  std::unordered_map<const void*, Entry> live;
};
Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: handles may be checked during exit
  return *r;
}
}  // namespace

void register_handle(const void* h, HandleKind kind, const void* owner) {
  Registry& r = registry();
  std::unique_lock lk(r.mu);
  r.live[h] = Entry{kind, owner};
}

void unregister_handle(const void* h) noexcept {
  Registry& r = registry();
  std::unique_lock lk(r.mu);
  r.live.erase(h);
}

bool is_live_handle(const void* h, HandleKind kind) noexcept {
  if (h == nullptr) return false;
  Registry& r = registry();
  std::shared_lock lk(r.mu);
  const auto it = r.live.find(h);
  return it != r.live.end() && it->second.kind == kind;
}

const void* handle_owner(const void* h) noexcept {
  Registry& r = registry();
  std::shared_lock lk(r.mu);
  const auto it = r.live.find(h);
  return it == r.live.end() ? nullptr : it->second.owner;
}

constexpr auto kHandleKindNames = std::to_array<support::EnumName<HandleKind>>({
    {HandleKind::kFabric, "fabric"},
    {HandleKind::kContext, "context"},
    {HandleKind::kCq, "completion queue"},
    {HandleKind::kQp, "queue pair"},
    {HandleKind::kMr, "property region"},
    {HandleKind::kPlan, "gather plan"},
});

const char* handle_kind_name(HandleKind kind) noexcept {
  return support::name_of<kHandleKindNames>(kind, "handle");
}

}  // namespace netsparse::rig
