/* base.h: the face of harness/base, the vocabulary every layer of the
 * harness shares: statuses and their order (status.h), tolerances and how a
 * value is judged against one (tolerance.h), validated JSON reading with
 * paths in its errors (jsonv.h), SHA-256 (sha256.h), UTF-8 checks (utf8.h),
 * and what the verbs and the libraries under them share: number parsing,
 * opening a model + backend + session from the common options
 * (cli_common.h), and chat templates recognized by family and rendered to
 * tokens (chat_template.h), the machine's read bandwidth (read_bandwidth.h),
 * the long-context passkey prompt (passkey.h).
 *
 * May use: the runtime's public headers (gt/), cJSON. Nothing else of the
 * harness. */
#ifndef GT_BASE_H
#define GT_BASE_H

#include "chat_template.h"
#include "cli_common.h"
#include "jsonv.h"
#include "passkey.h"
#include "read_bandwidth.h"
#include "sha256.h"
#include "status.h"
#include "tolerance.h"
#include "utf8.h"

#endif
