// The C API's per-thread last error (ns_last_error), the texts of its statuses (ns_status_str)
// and the map from a standard exception to a status (api_error.hpp).
#include "support/api_error.hpp"

#include <array>
#include <new>
#include <stdexcept>

#include "support/enum_names.hpp"
#include "support/memory.hpp"

namespace netsparse::support {
namespace {
thread_local std::string t_last_error;
}
void set_last_error(const std::string& what) {
  t_last_error = what;
}

std::pair<ns_status_t, std::string> status_of_current_exception() noexcept {
  try {
    throw;
  } catch (const OutOfMemory& e) {  // an estimate refused: its text names the size and purpose
    return {NS_ERR_NO_MEMORY, e.what()};
  } catch (const std::bad_alloc&) {
    return {NS_ERR_NO_MEMORY, "out of memory"};
  } catch (const std::invalid_argument& e) {
    return {NS_ERR_INVALID, e.what()};
  } catch (const std::length_error& e) {
    return {NS_ERR_UNSUPPORTED, e.what()};
  } catch (const std::logic_error& e) {
    return {NS_ERR_STATE, e.what()};
  } catch (const std::exception& e) {
    return {NS_ERR_TRANSPORT, e.what()};
  } catch (...) {
    return {NS_ERR_TRANSPORT, "unknown exception"};
  }
}
}  // namespace netsparse::support

extern "C" const char* ns_last_error(void) {
  return netsparse::support::t_last_error.c_str();
}

constexpr auto kStatusTexts = std::to_array<netsparse::support::EnumName<ns_status_t>>({
    {NS_OK, "success"},
    {NS_INPROGRESS, "in progress"},
    {NS_ERR_INVALID, "invalid argument"},
    {NS_ERR_NO_MEMORY, "out of memory"},
    {NS_ERR_NO_RESOURCE, "no resource (queue full): progress and retry"},
    {NS_ERR_TRANSPORT, "transport error"},
    {NS_ERR_TIMEOUT, "timed out"},
    {NS_ERR_UNSUPPORTED, "not supported"},
    {NS_ERR_MPI_THREAD_LEVEL, "insufficient MPI thread level"},
    {NS_ERR_NOT_REGISTERED, "no property region registered"},
    {NS_ERR_STATE, "invalid state"},
});

extern "C" const char* ns_status_str(ns_status_t s) {
  return netsparse::support::name_of<kStatusTexts>(s, "unknown status");
}
