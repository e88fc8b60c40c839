/* tests/fuzz/fuzz_dns.c - transparent mode's resolver (tp_dns_answer in
 * run/transparent.c): the bytes a sandboxed program sends to
 * 127.0.0.1:53, UDP payload or TCP message.
 *
 * One policy for the whole run (an allowed name, a denied name, a denied
 * wildcard, a port-only deny rule). Checked on every input: the answer is
 * dropped (0) or a well-formed header no longer than the buffer; it echoes
 * the query's id with QR set; it holds at most one answer, only with
 * NOERROR and one question, and that answer's address maps back
 * (tp_names_lookup) to a name that is not denied and that normalises to
 * itself; asking again gives the same bytes (a name keeps its address); a
 * buffer of exactly 512 bytes is never overrun (checked under ASan by an
 * exact-size heap block).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "run/transparent.h"

static struct tp *tp;
static struct egress_env *egress;
static struct policy *pol;
static uv_loop_t loop;

/* A denied name's record goes through the connection base: exercised, and
 * every field it carries is read. */
static void on_log(void *ctx, const struct connlog *r)
{
    (void)ctx;
    FUZZ_CHECK(r->protocol != NULL && r->verdict != NULL && strlen(r->rule) < 4096);
}

static void setup(void)
{
    static const char json[] =
        "{\"network\": {\"allowedDomains\": [\"ok.test\", \"*.ok.test\"],"
        " \"deniedDomains\": [\"evil.test\", \"*.bad.test\", \"port.test:443\"]}}";
    struct settings s;
    struct settings_error err;
    struct policy *p = NULL;

    settings_init(&s);
    FUZZ_CHECK(settings_apply_buffer(&s, "fuzz.json", json, strlen(json), &err) == 0);
    FUZZ_CHECK(policy_compile(&s, &p, &err) == 0);
    settings_free(&s);
    FUZZ_CHECK(uv_loop_init(&loop) == 0);
    FUZZ_CHECK(egress_env_new(&egress, &loop, p, NULL, NULL, 1000) == 0);
    pol = p;
    tp = tp_new_for_test(&loop, egress, on_log, NULL);
    FUZZ_CHECK(tp != NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *out = malloc(512), *again = malloc(512);
    size_t len, len2;

    if (tp == NULL)
        setup();
    FUZZ_CHECK(out != NULL && again != NULL);
    len = tp_dns_answer(tp, data, size, out, 512);
    FUZZ_CHECK(len == 0 || (len >= 12 && len <= 512));
    if (len > 0) {
        unsigned qd = (unsigned)out[4] << 8 | out[5], an = (unsigned)out[6] << 8 | out[7];
        FUZZ_CHECK(size >= 12 && out[0] == data[0] && out[1] == data[1]);
        FUZZ_CHECK((out[2] & 0x80) != 0 && (data[2] & 0x80) == 0);
        FUZZ_CHECK(an <= 1 && qd <= 1);
        FUZZ_CHECK(out[8] == 0 && out[9] == 0 && out[10] == 0 && out[11] == 0);
        if (an == 1) {
            struct policy_addr a;
            struct policy_host h;
            struct policy_judgment d;
            const char *name, *why;
            FUZZ_CHECK((out[3] & 15) == 0 && qd == 1);
            /* the answer's rdata ends the message: rdlength 16 (AAAA) or 4 (A) */
            memset(&a, 0, sizeof(a));
            if (len >= 28 && out[len - 18] == 0 && out[len - 17] == 16) {
                a.family = 6;
                memcpy(a.bytes, out + len - 16, 16);
            } else {
                FUZZ_CHECK(out[len - 6] == 0 && out[len - 5] == 4);
                a.family = 4;
                memcpy(a.bytes, out + len - 4, 4);
            }
            name = tp_names_lookup(tp_names_of(tp), &a);
            FUZZ_CHECK(name != NULL);
            FUZZ_CHECK(policy_host_normalize(name, strlen(name), &h, &why) == 0);
            FUZZ_CHECK(strcmp(h.name, name) == 0 && h.kind == POLICY_HOST_NAME);
            FUZZ_CHECK(!policy_dns_refused(pol, &h, &d));
        }
    }
    len2 = tp_dns_answer(tp, data, size, again, 512);
    FUZZ_CHECK(len2 == len && (len == 0 || memcmp(out, again, len) == 0));
    free(out);
    free(again);
    return 0;
}
