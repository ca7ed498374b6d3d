/* JSON lines for the measuring commands: each object is printed by the
 * command, these append one ", \"key\": value" member to it. */
#ifndef FA_CLI_JSON_OUT_H
#define FA_CLI_JSON_OUT_H

#include <stddef.h>

/* A string member, escaped (values come from the environment and errors). */
void fa_json_str(const char *key, const char *v);

/* A number member (10 significant digits), or null when !ok (not
 * measured, not applicable). */
void fa_json_num(const char *key, double v, int ok);

/* An exact byte count, or null when !ok. */
void fa_json_size(const char *key, size_t v, int ok);

#endif
