#pragma once
// The questions the headless remote subcommands may have to ask, asked the way ssh asks them: on
// the controlling terminal (/dev/tty), so they work while stdout is piped into a script. Without
// a terminal, or in batch mode, nothing is asked: unknown host keys are refused (the error
// prints the fingerprint) and encrypted keys and passwords are skipped.
#include "studio/remote/host_key.h"
#include "studio/remote/ssh_auth.h"

namespace studio::cli {

// yes: trust and save to known_hosts; once: trust for this connection; no: refuse.
studio::remote::HostKeyPolicy terminal_host_key_policy(bool batch);
// Reads the secret with echo off (on when the server says so).
studio::remote::SecretPrompt terminal_secret_prompt(bool batch);

}  // namespace studio::cli
