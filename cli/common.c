/* cli/common.c - helpers shared by subcommands. */
#include "cli/cli.h"
#include "cli/version.h"
#include "common/common.h"
#include "policy/policy.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>

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

int cli_version(void)
{
    printf("sluice %s (commit %s)\n", SLUICE_VERSION, SLUICE_COMMIT);
    return 0;
}

void cli_bad_option(const char *cmd, int c, char **argv, void (*usage)(FILE *f))
{
    const char *arg = optind > 0 ? argv[optind - 1] : "";
    char shortopt[3] = {'-', (char)optopt, '\0'};
    char name[256], esc[1024];

    if (strncmp(arg, "--", 2) != 0) /* a short option, maybe in a cluster */
        arg = shortopt;
    snprintf(name, sizeof(name), "%.*s", (int)strcspn(arg, "="), arg);
    common_escape(name, esc, sizeof(esc));
    if (c == ':') {
        fprintf(stderr, "sluice: %s: option '%s' needs a value\n", cmd, esc);
        return;
    }
    fprintf(stderr, "sluice: %s: unknown option '%s'%s\n", cmd, esc,
            strcmp(cmd, "run") == 0 ? " (the command goes after --)" : "");
    usage(stderr);
}
