#pragma once
// What a long command says when Ctrl-C (SIGINT) or SIGTERM ends it: one line on stderr about what it kept and how
// to go on, then the process ends as the signal ends it (a shell sees 128 + the signal number).
#include <string>

namespace alps {

/// Installs the handlers for SIGINT and SIGTERM (once; later calls do nothing).
void install_interrupt_notice();
/// The line printed if a signal arrives from now on (a newline is added); "" prints nothing. Not for signal
/// handlers; one thread sets it at a time.
void set_interrupt_notice(const std::string& line);

}  // namespace alps
