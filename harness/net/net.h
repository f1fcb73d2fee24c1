/* net.h: the face of harness/net: the HTTP client the http target and its
 * suites speak through (http_client.h), and getting artifacts by sha256
 * from the cache, mirrors, URLs (fetch.h) and PyPI wheels (fetch_pypi.h).
 *
 * May use: base, libcurl, cJSON. */
#ifndef GT_NET_H
#define GT_NET_H

#include "fetch.h"
#include "fetch_pypi.h"
#include "http_client.h"

#endif
