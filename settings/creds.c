/* settings/creds.c - the validator of "credentials" (issue 24, srt
 * 0.0.83's schema): credentials.envVars and credentials.files, lists of
 * {"name" | "path", "mode": "deny" | "mask", "extract", "onExtractNoMatch",
 * "decode", "maskClaims", "maskDuplicates", "injectHosts"}. Each entry is
 * checked where it is written (unknown member, missing or bad mode, a
 * member that means nothing for its mode or kind, an extract regex without
 * a group, an empty injectHosts, a bad host pattern, a name given twice)
 * and stored as one settings_item in the text form settings.h describes.
 * What needs the other keys (injectHosts against allowedDomains and
 * tlsTerminate.excludeDomains, mask without tlsTerminate) is judged when
 * the policy is compiled (policy/cred.c); what needs the secret (its
 * length, an extract that does not match) when `sluice run` reads it.
 */
#include "settings/settings-int.h"

#include <errno.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define ENTRY_HINT                                                                                 \
    "(an entry has name or path, mode, and optionally extract, onExtractNoMatch, "                 \
    "decode, maskClaims, maskDuplicates, injectHosts, require, requireHeader, value)"

static int mask_value(struct ctx *c, json_t *o, struct settings_text *b);


static int cb_line(struct settings_text *b, const char *s)
{
    return b->n > 0 && settings__text_add(b, "\n", 1) < 0 ? -ENOMEM : settings__text_add(b, s, strlen(s));
}

static int env_name_ok(const char *s)
{
    if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || *s == '_'))
        return 0;
    for (s++; *s != '\0'; s++)
        if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') ||
              *s == '_'))
            return 0;
    return 1;
}

/* No field of the text form may hold a line break (or another control
 * character, which no name, path, claim or regex here needs). */
static int has_control(const char *s)
{
    for (; *s != '\0'; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            return 1;
    return 0;
}

struct entry {
    json_t *name, *mode, *extract, *nomatch, *decode, *claims, *dups, *hosts, *require, *rhdr;
    json_t *value; /* envVars: {"exec": [...], "ttl", "timeout"} (issue 24 item 4) */
};

static int members(struct ctx *c, json_t *o, int file, struct entry *e)
{
    const char *key;
    json_t *m;

    json_object_foreach(o, key, m)
    {
        json_t **slot = strcmp(key, file ? "path" : "name") == 0 ? &e->name
                        : strcmp(key, "mode") == 0               ? &e->mode
                        : strcmp(key, "extract") == 0            ? &e->extract
                        : strcmp(key, "onExtractNoMatch") == 0   ? &e->nomatch
                        : strcmp(key, "decode") == 0             ? &e->decode
                        : strcmp(key, "maskClaims") == 0         ? &e->claims
                        : strcmp(key, "maskDuplicates") == 0     ? &e->dups
                        : strcmp(key, "injectHosts") == 0        ? &e->hosts
                        : strcmp(key, "require") == 0            ? &e->require
                        : strcmp(key, "requireHeader") == 0      ? &e->rhdr
                        : strcmp(key, "value") == 0              ? &e->value
                                                                 : NULL;
        int rc;

        settings__push_key(c, key);
        if (slot == NULL)
            rc = settings__fail(c, 1, "unknown key '%s' %s", key,
                                strcmp(key, file ? "name" : "path") == 0
                                    ? (file ? "(a files entry names its path)"
                                            : "(an envVars entry names its variable: name)")
                                    : ENTRY_HINT);
        else if (slot == &e->dups && !file)
            rc = settings__fail(c, 1, "applies to files entries only");
        else if (slot == &e->value && file)
            rc = settings__fail(c, 1,
                                "applies to envVars entries only (a masked file's fake copy is "
                                "made once, from the file)");
        else
            rc = 0;
        settings__pop(c);
        if (rc < 0)
            return rc;
        *slot = m;
    }
    return 0;
}

/* A member that must be a string: 0 with *out, or settings__fail's value. */
static int member_string(struct ctx *c, const char *key, json_t *m, const char **out)
{
    int rc = 0;

    settings__push_key(c, key);
    if (!json_is_string(m))
        rc = settings__fail(c, 0, "expected a string, got %s", settings__type_name(m));
    else if (json_string_length(m) == 0 || has_control(json_string_value(m)))
        rc = settings__fail(c, 0, "must be a non-empty string without control characters");
    else
        *out = json_string_value(m);
    settings__pop(c);
    return rc;
}

/* A list member (maskClaims, injectHosts): a non-empty array of strings,
 * each checked by ok (NULL or why), one per line of b (prefixed by tag). */
static int member_list(struct ctx *c, const char *key, json_t *m, const char *tag,
                       const char *(*ok)(const char *s), struct settings_text *b)
{
    int rc = 0;

    settings__push_key(c, key);
    if (!json_is_array(m))
        rc = settings__fail(c, 0, "expected an array of strings, got %s", settings__type_name(m));
    else if (json_array_size(m) == 0)
        rc = settings__fail(c, 0, "must not be empty%s",
                            strcmp(key, "injectHosts") == 0
                                ? ": a masked credential needs a host to be sent to (leave the "
                                  "member out for the hosts of network.allowedDomains)"
                                : "");
    for (size_t i = 0; rc == 0 && i < json_array_size(m); i++) {
        json_t *e = json_array_get(m, i);
        const char *why = NULL;
        settings__push_index(c, i);
        if (!json_is_string(e) || json_string_length(e) == 0 || has_control(json_string_value(e)))
            rc = settings__fail(c, 0, "expected a non-empty string without control characters");
        else if ((why = ok(json_string_value(e))) != NULL)
            rc = settings__fail(c, 0, "'%s': %s", json_string_value(e), why);
        else if (settings__text_add(b, "\n", 1) < 0 || settings__text_add(b, tag, strlen(tag)) < 0 ||
                 settings__text_add(b, json_string_value(e), json_string_length(e)) < 0)
            rc = settings__fail_nomem(c);
        settings__pop(c);
    }
    settings__pop(c);
    return rc;
}

static const char *claim_ok(const char *s)
{
    return strlen(s) > 256 ? "a claim name is at most 256 bytes" : NULL;
}

static const char *host_ok(const char *s)
{
    const char *why = NULL;

    if (settings__check_rule_host(s, &why) < 0)
        return why != NULL ? why : "invalid pattern";
    return NULL;
}

/* extract: a POSIX extended regex with at least one group (group 1 is the
 * secret). */
static int check_extract(struct ctx *c, const char *re)
{
    regex_t r;
    int rc = 0, e;

    settings__push_key(c, "extract");
    e = regcomp(&r, re, REG_EXTENDED);
    if (e != 0) {
        char why[160];
        regerror(e, &r, why, sizeof(why));
        rc = settings__fail(c, 0, "'%s': not a POSIX extended regular expression: %s", re, why);
    } else {
        if (r.re_nsub < 1)
            rc = settings__fail(c, 0, "'%s': needs a group: group 1 is the secret", re);
        regfree(&r);
    }
    settings__pop(c);
    return rc;
}

/* The rules between members (mode, kind): each member that means nothing
 * where it is written is refused, never ignored. */
static int check_combination(struct ctx *c, const struct entry *e, int mask)
{
    static const struct {
        size_t off;
        const char *key, *why;
    } need_mask[] = {
        {offsetof(struct entry, extract), "extract", "applies to mode \"mask\" only"},
        {offsetof(struct entry, decode), "decode", "applies to mode \"mask\" only"},
        {offsetof(struct entry, claims), "maskClaims", "applies to mode \"mask\" only"},
        {offsetof(struct entry, dups), "maskDuplicates", "applies to mode \"mask\" only"},
        {offsetof(struct entry, hosts), "injectHosts",
         "applies to mode \"mask\" only (a denied credential is never sent)"},
        {offsetof(struct entry, require), "require", "applies to mode \"mask\" only"},
        {offsetof(struct entry, rhdr), "requireHeader", "applies to mode \"mask\" only"},
        {offsetof(struct entry, value), "value",
         "applies to mode \"mask\" only (a denied variable has no value to fetch)"},
    };
    const char *key = NULL, *why = NULL;
    int rc;

    for (size_t i = 0; !mask && key == NULL && i < COUNT(need_mask); i++)
        if (*(json_t *const *)(const void *)((const char *)e + need_mask[i].off) != NULL) {
            key = need_mask[i].key;
            why = need_mask[i].why;
        }
    if (key == NULL && e->nomatch != NULL && e->extract == NULL) {
        key = "onExtractNoMatch";
        why = "applies with extract only";
    }
    if (key == NULL && e->claims != NULL && e->decode == NULL) {
        key = "maskClaims";
        why = "applies with \"decode\": \"jwt\" only";
    }
    if (key == NULL && e->rhdr != NULL && !json_is_true(e->require)) {
        key = "requireHeader";
        why = "applies with \"require\": true only";
    }
    if (key == NULL && e->value != NULL && (e->extract != NULL || e->decode != NULL)) {
        key = e->extract != NULL ? "extract" : "decode";
        why = "applies to a value read from the host's variable; with value the helper prints "
              "the secret itself";
    }
    if (key == NULL && json_is_true(e->require) && e->hosts == NULL) {
        key = "require";
        why = "needs explicit injectHosts (with the default, every host allowedDomains allows "
              "would need the placeholder)";
    }
    if (key == NULL)
        return 0;
    settings__push_key(c, key);
    rc = settings__fail(c, 1, "%s", why);
    settings__pop(c);
    return rc;
}

/* An HTTP header name (RFC 9110 token), at most 64 bytes. */
static int header_name_ok(const char *s)
{
    size_t n = strlen(s);

    if (n == 0 || n > 64)
        return 0;
    for (; *s != '\0'; s++)
        if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') ||
              (*s != '\0' && strchr("!#$%&'*+-.^_`|~", *s) != NULL)))
            return 0;
    return 1;
}

/* require (bool) and requireHeader: the line "r" + the header when on. */
static int require_line(struct ctx *c, const struct entry *e, struct settings_text *b)
{
    const char *hdr = "Authorization";
    int on = 0, rc = 0;

    if (e->require != NULL) {
        settings__push_key(c, "require");
        rc = settings__want_bool(c, e->require, &on);
        settings__pop(c);
    }
    if (rc == 0 && e->rhdr != NULL) {
        rc = member_string(c, "requireHeader", e->rhdr, &hdr);
        if (rc == 0 && !header_name_ok(hdr)) {
            settings__push_key(c, "requireHeader");
            rc = settings__fail(c, 0, "'%s': not an HTTP header name (a token of at most 64 bytes)",
                                hdr);
            settings__pop(c);
        }
    }
    if (rc < 0 || !on)
        return rc;
    if (settings__text_add(b, "\nr", 2) < 0 || settings__text_add(b, hdr, strlen(hdr)) < 0)
        return settings__fail_nomem(c);
    return 0;
}

static int one_entry(struct ctx *c, json_t *o, int file, struct settings_text *b)
{
    struct entry e = {0};
    const char *name = NULL, *mode = NULL, *extract = "", *nomatch = "error", *decode = "";
    int rc, mask, dups = 0;

    if (!json_is_object(o))
        return settings__fail(c, 0, "expected an entry object %s, got %s", ENTRY_HINT,
                              settings__type_name(o));
    rc = members(c, o, file, &e);
    if (rc < 0)
        return rc;
    if (e.name == NULL)
        return settings__fail(c, 0, "an entry needs %s", file ? "a path" : "a name");
    if (e.mode == NULL)
        return settings__fail(c, 0, "an entry needs a mode: \"deny\" or \"mask\"");
    rc = member_string(c, file ? "path" : "name", e.name, &name);
    if (rc < 0)
        return rc;
    settings__push_key(c, file ? "path" : "name");
    if (!file && !env_name_ok(name))
        rc = settings__fail(c, 0, "'%s': not a variable name ([A-Za-z_][A-Za-z0-9_]*)", name);
    else if (file && name[0] != '/' && !(name[0] == '~' && (name[1] == '/' || name[1] == '\0')))
        rc = settings__fail(c, 0, "'%s': must be an absolute path or start with ~/", name);
    settings__pop(c);
    if (rc == 0)
        rc = member_string(c, "mode", e.mode, &mode);
    if (rc < 0)
        return rc;
    if (strcmp(mode, "deny") != 0 && strcmp(mode, "mask") != 0) {
        settings__push_key(c, "mode");
        rc = settings__fail(c, 0, "expected \"deny\" or \"mask\", got '%s'", mode);
        settings__pop(c);
        return rc;
    }
    mask = mode[0] == 'm';
    rc = check_combination(c, &e, mask);
    if (rc == 0 && e.extract != NULL)
        rc = member_string(c, "extract", e.extract, &extract);
    if (rc == 0 && e.extract != NULL)
        rc = check_extract(c, extract);
    if (rc == 0 && e.nomatch != NULL) {
        rc = member_string(c, "onExtractNoMatch", e.nomatch, &nomatch);
        if (rc == 0 && strcmp(nomatch, "warn") != 0 && strcmp(nomatch, "deny") != 0 &&
            strcmp(nomatch, "error") != 0) {
            settings__push_key(c, "onExtractNoMatch");
            rc =
                settings__fail(c, 0, "expected \"warn\", \"deny\" or \"error\", got '%s'", nomatch);
            settings__pop(c);
        }
    }
    if (rc == 0 && e.decode != NULL) {
        rc = member_string(c, "decode", e.decode, &decode);
        if (rc == 0 && strcmp(decode, "jwt") != 0) {
            settings__push_key(c, "decode");
            rc = settings__fail(c, 0, "expected \"jwt\", got '%s'", decode);
            settings__pop(c);
        }
    }
    if (rc == 0 && e.dups != NULL) {
        settings__push_key(c, "maskDuplicates");
        rc = settings__want_bool(c, e.dups, &dups);
        settings__pop(c);
    }
    if (rc < 0)
        return rc;
    if (cb_line(b, file ? "file" : "env") < 0 || cb_line(b, name) < 0 || cb_line(b, mode) < 0 ||
        cb_line(b, extract) < 0 || cb_line(b, nomatch) < 0 || cb_line(b, decode) < 0 ||
        cb_line(b, dups ? "1" : "0") < 0)
        return settings__fail_nomem(c);
    if (e.claims != NULL && (rc = member_list(c, "maskClaims", e.claims, "c", claim_ok, b)) < 0)
        return rc;
    if (e.hosts != NULL && (rc = member_list(c, "injectHosts", e.hosts, "h", host_ok, b)) < 0)
        return rc;
    if ((rc = require_line(c, &e, b)) < 0 || e.value == NULL)
        return rc;
    settings__push_key(c, "value");
    rc = mask_value(c, e.value, b);
    settings__pop(c);
    return rc;
}

/* Where each of an array's n elements stands in the file (*found of them
 * located: the rest are reported at 1:1). 0, or -ENOMEM. */
static int array_positions(struct ctx *c, size_t n, struct jsonpos **pos, size_t *found)
{
    *found = 0;
    *pos = calloc(n, sizeof(**pos));
    if (*pos == NULL)
        return -ENOMEM;
    if (jsonpos_array(c->text, c->len, c->path, c->depth, *pos, n, found) < 0)
        *found = 0;
    return 0;
}

/* One entry of a list key checked into b (its text form); out holds the
 * entries before it. 0, or settings__fail's value. */
typedef int (*entry_fn)(struct ctx *c, json_t *o, int file, struct settings_text *b,
                        const struct settings_list *out);

/* A list key of entries (envVars, files, headers): replaced by a later
 * layer; each entry checked by one, where it is written. */
static int entry_list(struct ctx *c, json_t *v, const struct key_def *d, const char *hint,
                      int file, entry_fn one)
{
    struct settings_list *out = (struct settings_list *)settings__field(c, d);
    struct jsonpos *pos = NULL;
    size_t n, found = 0;
    int rc = 0;

    if (!json_is_array(v))
        return settings__fail(c, 0, "expected an array of entries %s, got %s", hint,
                              settings__type_name(v));
    n = json_array_size(v);
    settings__list_free(out);
    if (n == 0)
        return 0;
    if (array_positions(c, n, &pos, &found) < 0)
        return settings__fail_nomem(c);
    for (size_t i = 0; i < n && rc == 0; i++) {
        struct settings_text b = {0};
        settings__push_index(c, i);
        rc = one(c, json_array_get(v, i), file, &b, out);
        if (rc == 0 && b.p == NULL)
            rc = settings__fail_nomem(c);
        settings__pop(c);
        if (rc == 0) {
            unsigned line = i < found ? pos[i].line : 1, col = i < found ? pos[i].col : 1;
            if (settings__list_push(out, b.p, c->name, line, col, d->list, i) < 0)
                rc = settings__fail_nomem(c); /* list_push freed b.p */
            b.p = NULL;
        }
        free(b.p);
    }
    free(pos);
    return rc;
}

/* An envVars or files entry, and no name given twice. */
static int cred_one(struct ctx *c, json_t *o, int file, struct settings_text *b,
                    const struct settings_list *out)
{
    struct settings_credential cr;
    int rc = one_entry(c, o, file, b);

    if (rc == 0 && b->p == NULL)
        return settings__fail_nomem(c);
    for (size_t k = 0; rc == 0 && k < out->n; k++) {
        struct settings_credential was;
        if (settings_credential_split(out->items[k].value, &was) == 0 &&
            settings_credential_split(b->p, &cr) == 0 && was.name_len == cr.name_len &&
            memcmp(was.name, cr.name, cr.name_len) == 0)
            rc = settings__fail(c, 0, "'%.*s' is already entry %zu", (int)cr.name_len, cr.name, k);
    }
    return rc;
}

/* credentials.envVars and credentials.files: replaced by a later layer. */
int settings__fn_cred_entries(struct ctx *c, json_t *v, const struct key_def *d)
{
    return entry_list(c, v, d, ENTRY_HINT, strcmp(d->name, "files") == 0, cred_one);
}

/* credentials.allowPlaintextInject: the boolean and where it was set (a
 * file the sandbox could have written may not turn it on beside masked
 * entries: run/creds_trust.c). */
int settings__fn_plaintext_inject(struct ctx *c, json_t *v, const struct key_def *d)
{
    struct jsonpos pos;
    int rc;

    (void)d;
    rc = settings__want_bool(c, v, &c->v->credentials.plaintext.on);
    if (rc < 0)
        return rc;
    settings__locate(c, 0, &pos);
    c->v->credentials.plaintext.file = c->name;
    c->v->credentials.plaintext.line = pos.line;
    c->v->credentials.plaintext.col = pos.col;
    return 0;
}

/* The "credentials" object as a whole: where it was given. */
int settings__fn_credentials(struct ctx *c, json_t *v, const struct key_def *d)
{
    struct jsonpos pos;

    (void)v;
    (void)d;
    settings__locate(c, 1, &pos);
    c->v->credentials.given.set = 1;
    c->v->credentials.given.file = c->name;
    c->v->credentials.given.line = pos.line;
    c->v->credentials.given.col = pos.col;
    return 0;
}

/* ------------------------------------------------------------------------ */

int settings_credential_split(const char *text, struct settings_credential *r)
{
    const char *p = text, *f[7];
    size_t lens[7];

    memset(r, 0, sizeof(*r));
    for (size_t k = 0; k < 7; k++) {
        const char *nl = strchr(p, '\n');
        f[k] = p;
        lens[k] = nl != NULL ? (size_t)(nl - p) : strlen(p);
        if (nl == NULL && k < 6)
            return -EINVAL;
        p = nl != NULL ? nl + 1 : p + lens[k];
    }
    if (!(lens[0] == 3 && memcmp(f[0], "env", 3) == 0) &&
        !(lens[0] == 4 && memcmp(f[0], "file", 4) == 0))
        return -EINVAL;
    r->file = f[0][0] == 'f';
    r->name = f[1];
    r->name_len = lens[1];
    r->mask = lens[2] == 4 && memcmp(f[2], "mask", 4) == 0;
    r->extract = f[3];
    r->extract_len = lens[3];
    r->on_no_match = f[4][0] == 'w'   ? SETTINGS_NOMATCH_WARN
                     : f[4][0] == 'd' ? SETTINGS_NOMATCH_DENY
                                      : SETTINGS_NOMATCH_ERROR;
    r->jwt = lens[5] == 3;
    r->mask_duplicates = f[6][0] == '1';
    /* the rest: "\nc<claim>", "\nh<host>", ... lines */
    r->rest = f[6] + lens[6];
    {
        const char *rest = r->rest, *v;
        size_t vl;
        r->exec = settings_credential_next(&rest, 'x', &v, &vl);
        rest = r->rest;
        if (settings_credential_next(&rest, 't', &v, &vl))
            r->ttl_ms = (unsigned)strtoul(v, NULL, 10);
        rest = r->rest;
        if (settings_credential_next(&rest, 'o', &v, &vl))
            r->timeout_ms = (unsigned)strtoul(v, NULL, 10);
    }
    return r->name_len > 0 ? 0 : -EINVAL;
}

int settings_credential_next(const char **rest, char tag, const char **s, size_t *len)
{
    while (**rest == '\n') {
        const char *p = *rest + 1, *nl = strchr(p, '\n');
        size_t n = nl != NULL ? (size_t)(nl - p) : strlen(p);
        *rest = p + n;
        if (n > 0 && p[0] == tag) {
            *s = p + 1;
            *len = n - 1;
            return 1;
        }
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* awsPairs and sigv4 (AWS SigV4 re-signing: proxy/sigv4.c)                 */

/* One pair {accessKeyIdVar, secretAccessKeyVar, sessionTokenVar?}: its
 * variables as mask entries (role lines aK, aS, aT) pushed onto out. */
static int aws_pair(struct ctx *c, json_t *o, size_t idx, struct settings_list *out,
                    const struct key_def *d, unsigned line, unsigned col)
{
    static const char *const keys[3] = {"accessKeyIdVar", "secretAccessKeyVar", "sessionTokenVar"};
    static const char roles[3] = {'K', 'S', 'T'};
    const char *names[3] = {NULL, NULL, NULL}, *key;
    json_t *m, *hosts = NULL;
    struct settings_text hb = {0};
    int rc = 0;

    if (!json_is_object(o))
        return settings__fail(c, 0,
                              "expected a pair object {accessKeyIdVar, secretAccessKeyVar, "
                              "sessionTokenVar?}, got %s",
                              settings__type_name(o));
    json_object_foreach(o, key, m)
    {
        size_t k = 0;
        while (k < 3 && strcmp(key, keys[k]) != 0)
            k++;
        if (k == 3 && strcmp(key, "injectHosts") == 0) {
            hosts = m;
            continue;
        }
        if (k == 3) {
            settings__push_key(c, key);
            rc = settings__fail(c, 1,
                                "unknown key '%s' (a pair has accessKeyIdVar, secretAccessKeyVar "
                                "and optionally sessionTokenVar and injectHosts)",
                                key);
            settings__pop(c);
            return rc;
        }
        rc = member_string(c, key, m, &names[k]);
        if (rc == 0 && !env_name_ok(names[k])) {
            settings__push_key(c, key);
            rc = settings__fail(c, 0, "'%s': not a variable name ([A-Za-z_][A-Za-z0-9_]*)",
                                names[k]);
            settings__pop(c);
        }
        if (rc < 0)
            return rc;
    }
    if (names[0] == NULL || names[1] == NULL)
        return settings__fail(c, 0, "a pair needs accessKeyIdVar and secretAccessKeyVar");
    /* injectHosts (beyond srt, whose pairs go to allowedDomains): the same
     * "h" lines on each of the pair's variables */
    if (hosts != NULL && (rc = member_list(c, "injectHosts", hosts, "h", host_ok, &hb)) < 0) {
        free(hb.p);
        return rc;
    }
    for (size_t k = 0; k < 3; k++)
        for (size_t j = 0; j < k; j++)
            if (names[k] != NULL && strcmp(names[k], names[j]) == 0) {
                settings__push_key(c, keys[k]);
                rc = settings__fail(c, 0, "'%s' is already the pair's %s", names[k], keys[j]);
                settings__pop(c);
                return rc;
            }
    for (size_t k = 0; k < 3; k++) {
        struct settings_text b = {0};
        char role[4] = {'\n', 'a', roles[k], '\0'};
        if (names[k] == NULL)
            continue;
        for (size_t i = 0; i < out->n; i++) {
            struct settings_credential was;
            if (settings_credential_split(out->items[i].value, &was) == 0 &&
                was.name_len == strlen(names[k]) && memcmp(was.name, names[k], was.name_len) == 0) {
                free(hb.p);
                return settings__fail(c, 0, "'%s' is already in pair %zu", names[k],
                                      out->items[i].index);
            }
        }
        if (cb_line(&b, "env") < 0 || cb_line(&b, names[k]) < 0 || cb_line(&b, "mask") < 0 ||
            cb_line(&b, "") < 0 || cb_line(&b, "error") < 0 || cb_line(&b, "") < 0 ||
            cb_line(&b, "0") < 0 || settings__text_add(&b, role, 3) < 0 ||
            (hb.p != NULL && settings__text_add(&b, hb.p, hb.n) < 0)) {
            free(b.p);
            free(hb.p);
            return settings__fail_nomem(c);
        }
        if (settings__list_push(out, b.p, c->name, line, col, d->list, idx) < 0) {
            free(hb.p);
            return settings__fail_nomem(c); /* list_push freed b.p */
        }
    }
    free(hb.p);
    return 0;
}

/* credentials.awsPairs: replaced by a later layer, like envVars. */
int settings__fn_aws_pairs(struct ctx *c, json_t *v, const struct key_def *d)
{
    struct settings_list *out = (struct settings_list *)settings__field(c, d);
    struct jsonpos *pos = NULL;
    size_t n, found = 0;
    int rc = 0;

    if (!json_is_array(v))
        return settings__fail(c, 0,
                              "expected an array of pairs {accessKeyIdVar, secretAccessKeyVar, "
                              "sessionTokenVar?}, got %s",
                              settings__type_name(v));
    n = json_array_size(v);
    settings__list_free(out);
    if (n == 0)
        return 0;
    if (array_positions(c, n, &pos, &found) < 0)
        return settings__fail_nomem(c);
    for (size_t i = 0; i < n && rc == 0; i++) {
        settings__push_index(c, i);
        rc = aws_pair(c, json_array_get(v, i), i, out, d, i < found ? pos[i].line : 1,
                      i < found ? pos[i].col : 1);
        settings__pop(c);
    }
    free(pos);
    return rc;
}

/* credentials.sigv4: {streaming?, presigned?, sigv4a?: "deny" | "passthrough"}. */
int settings__fn_sigv4(struct ctx *c, json_t *v, const struct key_def *d)
{
    static const char *const keys[3] = {"streaming", "presigned", "sigv4a"};
    int val[3] = {0, 0, 0};
    const char *key;
    json_t *m;

    (void)d;
    if (!json_is_object(v))
        return settings__fail(c, 0, "expected an object {streaming?, presigned?, sigv4a?}, got %s",
                              settings__type_name(v));
    json_object_foreach(v, key, m)
    {
        size_t k = 0;
        int rc = 0;
        settings__push_key(c, key);
        while (k < 3 && strcmp(key, keys[k]) != 0)
            k++;
        if (k == 3)
            rc = settings__fail(c, 1, "unknown key '%s' (sigv4 has streaming, presigned, sigv4a)",
                                key);
        else if (!json_is_string(m) || (strcmp(json_string_value(m), "deny") != 0 &&
                                        strcmp(json_string_value(m), "passthrough") != 0))
            rc = settings__fail(c, 0, "expected \"deny\" or \"passthrough\"");
        else
            val[k] = json_string_value(m)[0] == 'p';
        settings__pop(c);
        if (rc < 0)
            return rc;
    }
    c->v->credentials.sigv4.streaming = val[0];
    c->v->credentials.sigv4.presigned = val[1];
    c->v->credentials.sigv4.sigv4a = val[2];
    return 0;
}

/* ------------------------------------------------------------------------ */
/* headers: header injection for sluice proxy as a gateway (sluice's)        */

#define HDR_HINT "(an entry has hosts, name and value)"
#define VALUE_HINT                                                                                 \
    "(a value is {\"file\": PATH} or {\"env\": NAME} or {\"exec\": [PROGRAM, ARG...], \"ttl\": "  \
    "SECONDS}, with optionally prefix, and timeout with exec)"

/* Headers the proxy itself frames or that are hop by hop: never injected. */
static const char *const hdr_refused[] = {
    "Host",    "Content-Length", "Transfer-Encoding",   "Connection",       "Keep-Alive",
    "Upgrade", "TE",             "Trailer",             "Proxy-Authorization", "Proxy-Connection",
    "Expect",  "Content-Encoding",
};

/* A prefix: printable ASCII, space and tab, at most 256 bytes. */
static int prefix_ok(const char *s)
{
    size_t n = 0;

    for (; *s != '\0'; s++, n++)
        if (!((*s >= 0x20 && *s < 0x7f) || *s == '\t'))
            return 0;
    return n <= 256;
}

struct hvalue {
    json_t *file, *env, *exec, *prefix, *ttl, *timeout;
};

static int value_members(struct ctx *c, json_t *o, struct hvalue *v)
{
    const char *key;
    json_t *m;

    json_object_foreach(o, key, m)
    {
        json_t **slot = strcmp(key, "file") == 0      ? &v->file
                        : strcmp(key, "env") == 0     ? &v->env
                        : strcmp(key, "exec") == 0    ? &v->exec
                        : strcmp(key, "prefix") == 0  ? &v->prefix
                        : strcmp(key, "ttl") == 0     ? &v->ttl
                        : strcmp(key, "timeout") == 0 ? &v->timeout
                                                      : NULL;
        if (slot == NULL) {
            int rc;
            settings__push_key(c, key);
            rc = settings__fail(c, 1, "unknown key '%s' %s", key, VALUE_HINT);
            settings__pop(c);
            return rc;
        }
        *slot = m;
    }
    return 0;
}

/* A member of the value object refused where it is (why). */
static int value_fail(struct ctx *c, const char *key, const char *why)
{
    int rc;

    settings__push_key(c, key);
    rc = settings__fail(c, 1, "%s", why);
    settings__pop(c);
    return rc;
}

/* exec: [PROGRAM (absolute), ARG...], one "x" line each. */
static int exec_lines(struct ctx *c, json_t *a, struct settings_text *b)
{
    int rc = 0;

    settings__push_key(c, "exec");
    if (!json_is_array(a) || json_array_size(a) == 0 || json_array_size(a) > 64)
        rc = settings__fail(c, 0, "expected an array of 1 to 64 strings [PROGRAM, ARG...], got %s",
                            !json_is_array(a)            ? settings__type_name(a)
                            : json_array_size(a) == 0 ? "an empty array"
                                                      : "more than 64");
    for (size_t i = 0; rc == 0 && i < json_array_size(a); i++) {
        json_t *e = json_array_get(a, i);
        settings__push_index(c, i);
        if (!json_is_string(e) || has_control(json_string_value(e)) ||
            (i == 0 && json_string_value(e)[0] != '/'))
            rc = settings__fail(c, 0, "%s",
                                i == 0 ? "the program: an absolute path (no shell, no PATH search)"
                                       : "expected a string without control characters");
        else if (settings__text_add(b, "\nx", 2) < 0 ||
                 settings__text_add(b, json_string_value(e), json_string_length(e)) < 0)
            rc = settings__fail_nomem(c);
        settings__pop(c);
    }
    settings__pop(c);
    return rc;
}

/* The value object: kind, source, prefix, ttl and timeout lines of the text
 * form (settings.h), and the "x" lines of exec into xb. */
static int header_value(struct ctx *c, json_t *o, struct settings_text *b, struct settings_text *xb)
{
    struct hvalue v = {0};
    const char *src = "", *prefix = "", *kind;
    unsigned ttl = 0, timeout = 10000;
    char nums[40];
    int rc, nsrc;

    if (!json_is_object(o))
        return settings__fail(c, 0, "expected an object %s, got %s", VALUE_HINT,
                              settings__type_name(o));
    rc = value_members(c, o, &v);
    if (rc < 0)
        return rc;
    nsrc = (v.file != NULL) + (v.env != NULL) + (v.exec != NULL);
    if (nsrc != 1)
        return settings__fail(c, 0, "needs exactly one of file, env and exec %s", VALUE_HINT);
    kind = v.file != NULL ? "file" : v.env != NULL ? "env" : "exec";
    if (v.file != NULL && (rc = member_string(c, "file", v.file, &src)) == 0 && src[0] != '/' &&
        !(src[0] == '~' && src[1] == '/'))
        rc = value_fail(c, "file", "must be an absolute path or start with ~/");
    if (rc == 0 && v.env != NULL && (rc = member_string(c, "env", v.env, &src)) == 0 &&
        !env_name_ok(src))
        rc = value_fail(c, "env", "not a variable name ([A-Za-z_][A-Za-z0-9_]*)");
    if (rc == 0 && v.exec != NULL)
        rc = exec_lines(c, v.exec, xb);
    if (rc == 0 && v.exec != NULL && v.ttl == NULL)
        rc = settings__fail(c, 0, "exec needs ttl: how many seconds its output may be used");
    if (rc == 0 && v.exec == NULL && v.ttl != NULL)
        rc = value_fail(c, "ttl", "applies with exec only (a file is read again on reload)");
    if (rc == 0 && v.exec == NULL && v.timeout != NULL)
        rc = value_fail(c, "timeout", "applies with exec only");
    if (rc == 0 && v.ttl != NULL) {
        settings__push_key(c, "ttl");
        rc = settings__want_seconds(c, v.ttl, 1000, 86400000, &ttl);
        settings__pop(c);
    }
    if (rc == 0 && v.timeout != NULL) {
        settings__push_key(c, "timeout");
        rc = settings__want_seconds(c, v.timeout, 100, 300000, &timeout);
        settings__pop(c);
    }
    if (rc == 0 && v.prefix != NULL) {
        settings__push_key(c, "prefix");
        if (!json_is_string(v.prefix) || !prefix_ok(json_string_value(v.prefix)))
            rc = settings__fail(c, 0, "expected a string of at most 256 printable ASCII bytes");
        else
            prefix = json_string_value(v.prefix);
        settings__pop(c);
    }
    if (rc < 0)
        return rc;
    snprintf(nums, sizeof(nums), "%u", v.exec != NULL ? ttl : 0);
    if (cb_line(b, kind) < 0 || cb_line(b, src) < 0 || cb_line(b, prefix) < 0 ||
        cb_line(b, nums) < 0)
        return settings__fail_nomem(c);
    snprintf(nums, sizeof(nums), "%u", v.exec != NULL ? timeout : 0);
    if (cb_line(b, nums) < 0)
        return settings__fail_nomem(c);
    return 0;
}

/* An envVars mask entry's value (issue 24 item 4): the value object of
 * credentials.headers with exec only, as "x" lines (the program first),
 * one line "t" + ttl in ms and one line "o" + timeout in ms. */
static int mask_value(struct ctx *c, json_t *o, struct settings_text *b)
{
    struct hvalue v = {0};
    unsigned ttl = 0, timeout = 10000;
    char nums[48];
    int rc;

    if (!json_is_object(o))
        return settings__fail(c, 0,
                              "expected an object {\"exec\": [PROGRAM, ARG...], \"ttl\": SECONDS, "
                              "\"timeout\": SECONDS}, got %s",
                              settings__type_name(o));
    rc = value_members(c, o, &v);
    if (rc == 0 && (v.file != NULL || v.env != NULL))
        rc = value_fail(c, v.file != NULL ? "file" : "env",
                        "an envVars entry's value is its variable on the host, or with value a "
                        "helper program's output (exec); file and env are credentials.headers' "
                        "sources");
    if (rc == 0 && v.prefix != NULL)
        rc = value_fail(c, "prefix", "applies to credentials.headers only (the command writes "
                                     "the header with the placeholder itself)");
    if (rc == 0 && v.exec == NULL)
        rc = settings__fail(c, 0, "needs exec: [PROGRAM, ARG...], the helper that prints the "
                                  "value");
    if (rc == 0 && v.ttl == NULL)
        rc = settings__fail(c, 0, "exec needs ttl: how many seconds its output may be used");
    if (rc == 0)
        rc = exec_lines(c, v.exec, b);
    if (rc == 0) {
        settings__push_key(c, "ttl");
        rc = settings__want_seconds(c, v.ttl, 1000, 86400000, &ttl);
        settings__pop(c);
    }
    if (rc == 0 && v.timeout != NULL) {
        settings__push_key(c, "timeout");
        rc = settings__want_seconds(c, v.timeout, 100, 300000, &timeout);
        settings__pop(c);
    }
    if (rc < 0)
        return rc;
    snprintf(nums, sizeof(nums), "\nt%u\no%u", ttl, timeout);
    return settings__text_add(b, nums, strlen(nums)) < 0 ? settings__fail_nomem(c) : 0;
}

static int header_name(struct ctx *c, json_t *m, const char **name)
{
    int rc = member_string(c, "name", m, name);

    if (rc < 0)
        return rc;
    settings__push_key(c, "name");
    if (!header_name_ok(*name))
        rc = settings__fail(c, 0, "'%s': not an HTTP header name (a token of at most 64 bytes)",
                            *name);
    for (size_t i = 0; rc == 0 && i < COUNT(hdr_refused); i++)
        if (strcasecmp(*name, hdr_refused[i]) == 0)
            rc = settings__fail(c, 0,
                                "'%s': the proxy frames or strips this header itself; it cannot "
                                "be injected",
                                *name);
    settings__pop(c);
    return rc;
}

static int header_entry(struct ctx *c, json_t *o, struct settings_text *b)
{
    json_t *hosts = NULL, *name = NULL, *value = NULL, *m;
    struct settings_text xb = {0};
    const char *key, *hname = NULL;
    int rc = 0;

    if (!json_is_object(o))
        return settings__fail(c, 0, "expected an entry object %s, got %s", HDR_HINT,
                              settings__type_name(o));
    json_object_foreach(o, key, m)
    {
        json_t **slot = strcmp(key, "hosts") == 0   ? &hosts
                        : strcmp(key, "name") == 0  ? &name
                        : strcmp(key, "value") == 0 ? &value
                                                    : NULL;
        if (slot == NULL) {
            settings__push_key(c, key);
            rc = settings__fail(c, 1, "unknown key '%s' %s", key, HDR_HINT);
            settings__pop(c);
            return rc;
        }
        *slot = m;
    }
    if (hosts == NULL || name == NULL || value == NULL)
        return settings__fail(c, 0, "an entry needs %s %s",
                              hosts == NULL ? "hosts" : name == NULL ? "name" : "value", HDR_HINT);
    rc = header_name(c, name, &hname);
    if (rc == 0 && (cb_line(b, "hdr") < 0 || cb_line(b, hname) < 0))
        rc = settings__fail_nomem(c);
    if (rc == 0) {
        settings__push_key(c, "value");
        rc = header_value(c, value, b, &xb);
        settings__pop(c);
    }
    if (rc == 0)
        rc = member_list(c, "hosts", hosts, "h", host_ok, b);
    if (rc == 0 && xb.p != NULL && settings__text_add(b, xb.p, xb.n) < 0)
        rc = settings__fail_nomem(c);
    free(xb.p);
    return rc;
}

static int header_one(struct ctx *c, json_t *o, int file, struct settings_text *b,
                      const struct settings_list *out)
{
    (void)file;
    (void)out;
    return header_entry(c, o, b);
}

/* credentials.headers: replaced by a later layer. */
int settings__fn_cred_headers(struct ctx *c, json_t *v, const struct key_def *d)
{
    return entry_list(c, v, d, HDR_HINT, 0, header_one);
}

int settings_header_split(const char *text, struct settings_header *r)
{
    const char *p = text, *f[7];
    size_t lens[7];

    memset(r, 0, sizeof(*r));
    for (size_t k = 0; k < 7; k++) {
        const char *nl = strchr(p, '\n');
        f[k] = p;
        lens[k] = nl != NULL ? (size_t)(nl - p) : strlen(p);
        if (nl == NULL && k < 6)
            return -EINVAL;
        p = nl != NULL ? nl + 1 : p + lens[k];
    }
    if (!(lens[0] == 3 && memcmp(f[0], "hdr", 3) == 0))
        return -EINVAL;
    r->name = f[1];
    r->name_len = lens[1];
    r->kind = f[2][0] == 'f'   ? SETTINGS_HDR_FILE
              : f[2][0] == 'e' && lens[2] == 3 && f[2][1] == 'n' ? SETTINGS_HDR_ENV
                                                                 : SETTINGS_HDR_EXEC;
    r->source = f[3];
    r->source_len = lens[3];
    r->prefix = f[4];
    r->prefix_len = lens[4];
    r->ttl_ms = (unsigned)strtoul(f[5], NULL, 10);
    r->timeout_ms = (unsigned)strtoul(f[6], NULL, 10);
    r->rest = f[6] + lens[6];
    return r->name_len > 0 ? 0 : -EINVAL;
}
