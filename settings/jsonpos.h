/* settings/jsonpos.h - where a value sits in JSON text (internal to settings/).
 *
 * jansson reports positions only for parse errors. The settings loader
 * needs the line and column of values it rejects or records, so this
 * re-scans the text jansson already accepted. The scanner is lenient (it
 * trusts jansson's verdict on syntax) but never reads outside the buffer.
 * Lines and columns are 1-based; a column counts characters (UTF-8 code
 * points), like jansson's own error columns.
 */
#ifndef SLUICE_SETTINGS_JSONPOS_H
#define SLUICE_SETTINGS_JSONPOS_H

#include <stddef.h>

/* One step of a key path: an object key (key != NULL, compared after
 * decoding escapes) or an array index (key == NULL). */
struct jsonpos_step {
    const char *key;
    size_t keylen;
    size_t index;
};

struct jsonpos {
    unsigned line, col;
};

/* Position of the value at path (depth 0: the top-level value). With
 * at_key set and the last step a key, the position of that key's opening
 * quote instead. Returns 0, or -ENOENT when the path is not in the text. */
int jsonpos_find(const char *text, size_t len, const struct jsonpos_step *path, size_t depth,
                 int at_key, struct jsonpos *out);

/* Positions of the first n elements of the array at path, in one pass over
 * the text (O(text) however long the array). *found receives how many were
 * located; the rest of out is left untouched. Returns 0, or -ENOENT when
 * path is not an array in the text. */
int jsonpos_array(const char *text, size_t len, const struct jsonpos_step *path, size_t depth,
                  struct jsonpos *out, size_t n, size_t *found);

#endif
