// One-line log messages on stderr: "veil-server[party P] 2026-12-02T09:30:00Z: text".
#ifndef VEIL_SERVER_LOG_H_
#define VEIL_SERVER_LOG_H_

#include "absl/strings/string_view.h"

namespace veil::server {

// Sets the "[party P]" tag of later lines (-1: none).
void SetLogParty(int party);
void Log(absl::string_view text);

}  // namespace veil::server

#endif  // VEIL_SERVER_LOG_H_
