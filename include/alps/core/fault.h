#pragma once
// Fault injection for tests of crash safety. A test sets ALPS_TEST_FAULT to a comma-separated list of names; the
// program then dies by SIGKILL at `crash_point(name)` (no destructor, no flush: exactly what `kill -9` or a power
// loss leaves behind), or takes the alternative path guarded by `fault_enabled(name)`. Unset, both are no-ops.
#include <string_view>

namespace alps {

/// True when `name` is listed in $ALPS_TEST_FAULT.
bool fault_enabled(std::string_view name);

/// Kills the process with SIGKILL when "crash:<name>" (first time reached) or "crash:<name>@<k>" (k-th time) is
/// listed in $ALPS_TEST_FAULT; raises SIGINT (a Ctrl-C) for "interrupt:<name>" or "interrupt:<name>@<k>"; sleeps
/// forever (a hung process) for "hang:<name>[@<k>]". A suffix "#<r>" limits any of them to the process of rank r of a
/// distributed run ($RANK).
void crash_point(std::string_view name);

}  // namespace alps
