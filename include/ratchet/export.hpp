// Symbol visibility for libratchet. Everything is hidden by default; only
// declarations marked RATCHET_API form the library's exported surface.
#pragma once

#if defined(RATCHET_BUILDING_LIBRARY)
#define RATCHET_API __attribute__((visibility("default")))
#else
#define RATCHET_API
#endif
