/* cli/common.c - helpers shared by subcommands. */
#include "cli/cli.h"
#include "policy/policy.h"

#include <stdio.h>

int cli_load_settings(struct settings *s, const char *explicit_path)
{
    struct settings_error err;
    size_t i;

    settings_init(s);
    if (settings_load(s, explicit_path, &err) < 0 || settings_apply_managed(s, NULL, &err) < 0) {
        fprintf(stderr, "%s\n", err.msg);
        settings_free(s);
        settings_init(s);
        return -1;
    }
    for (i = 0; i < s->notices.n; i++)
        fprintf(stderr, "sluice: warning: %s\n", s->notices.items[i].value);
    return 0;
}
