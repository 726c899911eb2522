/* The stable C ABI between the ratchet engine and its plugins.
 *
 * A plugin is a shared library that exports exactly one C symbol,
 * ratchet_plugin_entry_v1, returning a constant descriptor: ABI version, the
 * plugin's name and version, and its operations (name plus C function). The
 * engine calls an operation with its arguments and the plugin's config as JSON
 * text, a table of host services (HTTP through the engine's limiters and
 * retry, logging, cancellation, output buffers) and the call's context; the
 * operation fills in a reply (status, retry-after, JSON output or message).
 *
 * Only C types cross this boundary: no C++ types, no exceptions, no
 * allocator mismatch (every buffer that crosses is allocated and freed by the
 * same side). Plugin authors normally use the C++ SDK, ratchet/plugin.hpp,
 * which builds all of this from ordinary C++.
 *
 * Versioning. The entry point's name carries the ABI generation: a future,
 * incompatible ABI exports ratchet_plugin_entry_v2 and an engine may support
 * both. Within one generation structs only ever grow at the end, and each
 * carries its size as built (`struct_size`): a reader checks the size before
 * touching a field added later, so old plugins keep working with new engines
 * and the reverse.
 *
 * Ownership, in one place:
 *  - The descriptor, its strings and its operation array belong to the plugin
 *    and must stay valid and unchanged while the library is loaded.
 *  - Everything the host passes into an operation (args, config, context,
 *    host table, HTTP responses) is owned by the host and valid until the
 *    operation returns; copy what must live longer.
 *  - HTTP request fields passed to http_request are owned by the plugin and
 *    only read during that call.
 *  - The reply's output buffer must come from host->alloc; ownership passes
 *    to the host when the operation returns, and the host frees it. A plugin
 *    never frees host memory and the host never frees plugin memory.
 *
 * Threading: the host may call operations of one plugin from many threads at
 * once; operations must be reentrant. The host table is per call and may be
 * used from the calling thread only.
 *
 * Strings are UTF-8, pointer plus length, and not necessarily NUL-terminated,
 * except the descriptor's names, which are NUL-terminated.
 */
#ifndef RATCHET_PLUGIN_H_
#define RATCHET_PLUGIN_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The ABI generation this header describes; also in the entry point's name. */
#define RATCHET_PLUGIN_ABI_VERSION 1u
#define RATCHET_PLUGIN_ENTRY_SYMBOL "ratchet_plugin_entry_v1"

/* ----------------------------------------------------------------- values */

/* A borrowed string: `size` bytes at `data` (data may be NULL when size is 0). */
typedef struct ratchet_str {
  const char* data;
  size_t size;
} ratchet_str;

/* What an operation reports. Stored in int32_t fields so that the size of an
 * enum never matters. */
enum {
  RATCHET_STATUS_OK = 0,        /* output is the result as JSON text */
  RATCHET_STATUS_RETRYABLE = 1, /* transient failure; output is a message */
  RATCHET_STATUS_THROTTLED = 2, /* the portal said slow down; output is a message */
  RATCHET_STATUS_FATAL = 3      /* retrying cannot help; output is a message */
};

/* Why an HTTP request produced no response. */
enum {
  RATCHET_HTTP_OK = 0,        /* a response arrived (any HTTP status) */
  RATCHET_HTTP_REFUSED = 1,   /* the engine's limiter or breaker refused or throttled it */
  RATCHET_HTTP_TIMEOUT = 2,   /* connect or total timeout */
  RATCHET_HTTP_CONNECT = 3,   /* DNS failure, connection refused or reset */
  RATCHET_HTTP_TLS = 4,       /* certificate or handshake failure */
  RATCHET_HTTP_TOO_LARGE = 5, /* the response exceeded the configured size bound */
  RATCHET_HTTP_CANCELLED = 6, /* the call was cancelled or timed out */
  RATCHET_HTTP_OTHER = 7      /* anything else; see the message */
};

enum { RATCHET_LOG_DEBUG = 0, RATCHET_LOG_INFO = 1, RATCHET_LOG_WARN = 2, RATCHET_LOG_ERROR = 3 };

/* "No retry-after given" in the *_retry_after_ms fields. */
#define RATCHET_NO_RETRY_AFTER (-1)

typedef struct ratchet_header {
  ratchet_str name;
  ratchet_str value;
} ratchet_header;

/* ------------------------------------------------------------------- HTTP */

/* Filled in by the plugin; read by the host only during http_request. */
typedef struct ratchet_http_request {
  uint32_t struct_size; /* sizeof(ratchet_http_request) as the plugin was built */
  ratchet_str method;   /* "GET", "POST", ... */
  ratchet_str url;
  const ratchet_header* headers;
  size_t header_count;
  ratchet_str body;
  /* A later field (the host reads it only when struct_size covers it). The
   * units of the plugin's limits this request is expected to cost (a
   * GraphQL query's estimated points); 0 or less: the cost the operation
   * declares (`cost` in its config, 1 by default); over 1,000,000 (the
   * most a call may cost): ignored, with a warning. A request that proves
   * dearer or cheaper is corrected with report_cost. */
  int64_t cost;
} ratchet_http_request;

/* Filled in by the host. All pointers are owned by the host and stay valid
 * until the operation returns. The plugin sets struct_size before the call;
 * the host writes only the fields that fit in it. */
typedef struct ratchet_http_response {
  uint32_t struct_size;    /* sizeof(ratchet_http_response) as the plugin was built */
  int32_t transport_error; /* RATCHET_HTTP_*; when not OK only `message` and
                              `retry_after_ms` are meaningful */
  int32_t status;          /* HTTP status code */
  const ratchet_header* headers;
  size_t header_count;
  ratchet_str body;
  ratchet_str message;    /* why a transport error happened; empty on OK */
  int64_t retry_after_ms; /* the host's reading of Retry-After or reset headers,
                             or RATCHET_NO_RETRY_AFTER */
} ratchet_http_response;

/* ---------------------------------------------------------- host services */

/* The services the host offers during one call. Grows only at the end; read
 * `struct_size` before using a field a newer header added. Every function
 * takes `host_data` as its first argument. */
typedef struct ratchet_host_services {
  uint32_t struct_size; /* sizeof(ratchet_host_services) as the host was built */
  void* host_data;      /* opaque; pass back unchanged */

  /* Allocates `size` bytes for the reply's output. Returns NULL when out of
   * memory or when the host's output bound is exceeded. The host frees every
   * buffer it handed out when the call ends; the plugin never frees them. */
  char* (*alloc)(void* host_data, size_t size);

  /* Sends one HTTP request through the engine's client, limiters and retry
   * policy for this plugin. Always fills `response` (transport_error tells
   * whether a response arrived). Returns response->transport_error. */
  int32_t (*http_request)(void* host_data, const ratchet_http_request* request,
                          ratchet_http_response* response);

  /* Writes a line to the engine's log, tagged with the plugin's name. */
  void (*log)(void* host_data, int32_t level, ratchet_str message);

  /* Nonzero once the call is cancelled or past its timeout; a long operation
   * should check it and return. */
  int32_t (*is_cancelled)(void* host_data);

  /* A later field: check struct_size before calling it. The units the last
   * HTTP request of this call really cost, as its reply said (a cost field,
   * a header): the limits it was counted in are corrected at once, so an
   * overdraft makes later calls wait and a refund frees room. Before the
   * call's first request it does nothing; over 1,000,000 units (the most a
   * call may cost: a server's reply is not to be trusted that far) it is
   * ignored, with a warning. */
  void (*report_cost)(void* host_data, int64_t units);
} ratchet_host_services;

/* ------------------------------------------------------------------- calls */

/* Who is calling. Owned by the host; valid until the operation returns. */
typedef struct ratchet_call_context {
  uint32_t struct_size;        /* sizeof(ratchet_call_context) as the host was built */
  ratchet_str idempotency_key; /* stable across every attempt of one step */
  ratchet_str job_id;          /* empty outside a job */
  ratchet_str step_name;       /* empty outside a job */
  ratchet_str operation;       /* the operation's name */
} ratchet_call_context;

/* The operation's answer. The host zeroes it, sets struct_size and sets
 * retry_after_ms to RATCHET_NO_RETRY_AFTER before the call. */
typedef struct ratchet_reply {
  uint32_t struct_size;   /* sizeof(ratchet_reply) as the host was built */
  int32_t status;         /* RATCHET_STATUS_* */
  int64_t retry_after_ms; /* with THROTTLED (or RETRYABLE): how long to wait,
                             or RATCHET_NO_RETRY_AFTER */
  char* output;           /* from host->alloc; JSON when OK, else a message */
  size_t output_size;
} ratchet_reply;

typedef void (*ratchet_operation_fn)(const ratchet_host_services* host, const ratchet_call_context* context,
                                     ratchet_str args, ratchet_str config, ratchet_reply* reply);

/* -------------------------------------------------------------- descriptor */

/* The units of the plugin's limits a call with these arguments and config
 * is expected to cost, asked before the call is admitted to those limits so
 * that the call waits once, for a slot of that size (a GraphQL query's
 * points, a batch's size). 0 or less: the cost the operation declares.
 * Called on the engine's worker thread: it must return quickly, without
 * blocking or calling the host, and must never fail; args and config are
 * JSON text owned by the host, valid during the call. */
typedef int64_t (*ratchet_estimate_fn)(ratchet_str args, ratchet_str config);

typedef struct ratchet_operation {
  const char* name; /* NUL-terminated, e.g. "get_rating" */
  ratchet_operation_fn fn;
  /* A later field (the host reads it only when the descriptor's
   * operation_size covers it). Optional, may be NULL: without it a call is
   * admitted at its declared cost, and a request that carries a larger
   * estimate (ratchet_http_request.cost) waits again for room for it. */
  ratchet_estimate_fn estimate;
} ratchet_operation;

typedef struct ratchet_plugin_descriptor {
  uint32_t abi_version; /* RATCHET_PLUGIN_ABI_VERSION */
  uint32_t struct_size; /* sizeof(ratchet_plugin_descriptor) as the plugin was built */
  const char* name;     /* NUL-terminated, [a-z0-9_]+, the name config refers to */
  const char* version;  /* NUL-terminated, e.g. "1.2.0" */
  const ratchet_operation* operations;
  uint32_t operation_count;
  uint32_t operation_size; /* sizeof(ratchet_operation) as built: the array's stride */

  /* Optional (may be NULL). init runs once after loading, before any call;
   * it returns NULL on success or a static NUL-terminated reason, and then
   * the library is refused. shutdown runs once before unloading, after the
   * last call into the library has returned. */
  const char* (*init)(void);
  void (*shutdown)(void);
} ratchet_plugin_descriptor;

/* The one exported symbol: returns a pointer to a descriptor that lives as
 * long as the library. Must not fail or throw. */
typedef const ratchet_plugin_descriptor* (*ratchet_plugin_entry_fn)(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* RATCHET_PLUGIN_H_ */
