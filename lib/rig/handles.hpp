// The C API's live handles: every ns_* entry point checks that the handle it gets is one the
// library created and has not yet closed or destroyed, before touching it. A closed context, a
// destroyed CQ, a second ns_close: NS_ERR_INVALID ("... is not a live handle"), never a use
// after free. The check is a lookup in a set keyed by address and kind, under a shared lock
// (tens of nanoseconds, yet about a tenth of a one-idx post and poll: docs/benchmarks.md, "The
// unchecked fast path"); it never dereferences the
// handle. The one exception: ns_post_send and ns_poll_cq on the handles of an NS_CTX_UNCHECKED
// context, which carry that choice in their value (api.cpp) and are taken on trust.
#pragma once

namespace netsparse::rig {

enum class HandleKind : unsigned char { kFabric, kContext, kCq, kQp, kMr, kPlan };

// `owner`: the context a queue, completion queue or region belongs to (nullptr for contexts and
// fabrics). The objects themselves do not point back at their engine: the API finds it here.
void register_handle(const void* h, HandleKind kind, const void* owner = nullptr);
void unregister_handle(const void* h) noexcept;
bool is_live_handle(const void* h, HandleKind kind) noexcept;
// The owner given at registration; nullptr when `h` is not live.
const void* handle_owner(const void* h) noexcept;
const char* handle_kind_name(HandleKind kind) noexcept;

}  // namespace netsparse::rig
