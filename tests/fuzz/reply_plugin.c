/* The plugin behind the plugin_abi fuzz target: its one operation, "reply",
 * answers with whatever its arguments spell, so the fuzzer plays a plugin
 * that returns anything at all through the C ABI.
 *
 * The arguments are raw bytes (the harness passes the fuzz input as they
 * are): byte 0 is the status (as a signed byte, so also unknown ones),
 * byte 1 how the output buffer is handed back, byte 2 the retry-after in
 * tenths of a second (255: none), the rest the output text.
 *   mode % 6: 0 host->alloc'd, exact size; 1 NULL with size 0; 2 NULL with
 *   the text's size; 3 host->alloc'd but one byte more claimed than
 *   allocated; 4 a buffer the host did not allocate; 5 host->alloc'd, the
 *   size left at 0. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "ratchet/plugin.h"

static char foreign[64];

static void reply(const ratchet_host_services* host, const ratchet_call_context* ctx, ratchet_str args,
                  ratchet_str config, ratchet_reply* out) {
  const unsigned char* in = (const unsigned char*)args.data;
  size_t n = args.data == NULL ? 0 : args.size;
  unsigned mode = n > 1 ? in[1] % 6u : 0u;
  const char* text = n > 3 ? (const char*)in + 3 : "";
  size_t text_size = n > 3 ? n - 3 : 0;
  (void)ctx, (void)config;
  out->status = n > 0 ? (int32_t)(signed char)in[0] : RATCHET_STATUS_OK;
  if (n > 2 && in[2] != 255) out->retry_after_ms = (int64_t)in[2] * 100;
  switch (mode) {
    case 0:
    case 3:
    case 5:
      out->output = host->alloc(host->host_data, text_size);
      if (out->output == NULL) return;
      if (text_size > 0) memcpy(out->output, text, text_size);
      out->output_size = mode == 0 ? text_size : mode == 3 ? text_size + 1 : 0;
      return;
    case 1:
      out->output = NULL;
      out->output_size = 0;
      return;
    case 2:
      out->output = NULL;
      out->output_size = text_size;
      return;
    default:
      text_size = text_size < sizeof foreign ? text_size : sizeof foreign;
      if (text_size > 0) memcpy(foreign, text, text_size);
      out->output = foreign;
      out->output_size = text_size;
      return;
  }
}

static const ratchet_operation operations[] = {{"reply", reply, NULL}};

static const ratchet_plugin_descriptor descriptor = {
    RATCHET_PLUGIN_ABI_VERSION,
    sizeof(ratchet_plugin_descriptor),
    "fuzz_reply",
    "1.0",
    operations,
    sizeof operations / sizeof operations[0],
    sizeof(ratchet_operation),
    NULL,
    NULL,
};

__attribute__((visibility("default"))) const ratchet_plugin_descriptor* ratchet_plugin_entry_v1(void) {
  return &descriptor;
}
