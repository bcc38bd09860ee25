/* mo_cli: command-line parsing for mock_operator. */
#include "mo_cli.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "mo_fault.h"
#include "mo_journal.h"
#include "xalloc.h"

#define DEFAULT_JOURNAL_LIMIT 10000

void mo_cli_usage(FILE *out)
{
    fprintf(out,
            "usage: mock_operator [options]\n"
            "\n"
            "A stand-in for DI-orchestrator's server (API v1alpha1): answers\n"
            "GET/POST/DELETE /v1alpha1/replicas and POST /v1alpha1/replicas/failed from\n"
            "learner and collector lists kept per (namespace, coordinator-or-aggregator\n"
            "name), with a control API to change the lists, inject faults and read the\n"
            "journal of requests. Prints {\"ready\": true, \"port\": P, \"control_port\": P}\n"
            "on stdout once both ports listen; logs go to stderr.\n"
            "\n"
            "options:\n"
            "  --host H                address to listen on (default 127.0.0.1)\n"
            "  --port P                API port; 0 picks a free one (default 0)\n"
            "  --control-port P        control API port; 0 picks a free one (default 0)\n"
            "  --learners NS/NAME=ADDR,ADDR...\n"
            "                          learners (host:port) of the coordinator or aggregator\n"
            "                          NAME in namespace NS; repeatable; an empty list just\n"
            "                          declares NS/NAME (unknown names get 404)\n"
            "  --collectors NS/NAME=ADDR,ADDR...\n"
            "                          the same for collectors\n"
            "  --on-failed recreate|remove\n"
            "                          what POST /v1alpha1/replicas/failed does with a failed\n"
            "                          pod: recreate it under a new name like the original\n"
            "                          (default), or remove it from the list\n"
            "  --seed N                seed of the random part of invented pod names\n"
            "                          (default: random)\n"
            "  --journal-limit N       requests kept in the journal, 1-%d (default %d)\n"
            "  --log-level L           debug|info|warn|error|off (default info)\n"
            "  --log-format F          human|json (default human)\n"
            EVT_CLI_HELP
            "  --help                  print this help and exit\n"
            "  --version               print the version and exit\n"
            "\n"
            "control API (JSON over HTTP on the control port): GET /control/state;\n"
            "PUT /control/learners, POST /control/learners/add, /control/learners/remove\n"
            "(and the same for collectors); DELETE /control/replicas; PUT\n"
            "/control/settings; POST/GET/DELETE /control/fault; GET/DELETE\n"
            "/control/journal (every API request, its answer and the fault applied).\n"
            "\n"
            "faults (POST /control/fault, one JSON object each):\n"
            "  {\"kind\": \"error_status\", \"status\": S}  answer HTTP S (200-599, default\n"
            "                          500) with a failure envelope instead of the answer\n"
            "  {\"kind\": \"delay\", \"delay_ms\": T}  answer normally, T ms late (1-%ld;\n"
            "                          required)\n"
            "  {\"kind\": \"garbage\", \"body\": B}    answer 200 with body B, which is not JSON\n"
            "                          (default \"<html>not json</html>\", at most %d bytes)\n"
            "  {\"kind\": \"refuse\"}                close the API port until the fault is\n"
            "                          cleared (connections refused)\n"
            "  error_status, delay and garbage also take \"count\": k (the next k requests\n"
            "  only; default until cleared), \"path\": \"/v1alpha1/replicas\" (this path\n"
            "  only), \"method\": \"GET\" (this method only); error_status and garbage\n"
            "  take \"delay_ms\" too (answer that late). Every fault takes \"optional\":\n"
            "  true (it need not apply in a run; for the scenario runner's verdict). The\n"
            "  first fault that matches a request applies to it; refuse takes nothing else.\n"
            "\n"
            "run_scenarios starts it with --on-failed remove (a failed learner leaves\n"
            "the list; the default, recreate, is what DI-orchestrator does: it invents a\n"
            "replacement address that resolves nowhere in a test).\n"
            "\n"
            "exit status: 0 after SIGTERM/SIGINT, 1 on a runtime failure, 2 on a usage error\n",
            MO_JOURNAL_LIMIT_MAX, DEFAULT_JOURNAL_LIMIT, MO_FAULT_DELAY_MAX_MS, MO_FAULT_BODY_MAX);
}

static bool parse_ulong(const char *s, unsigned long long max, unsigned long long *out)
{
    if (!s || !*s || s[0] == '-' || s[0] == '+' || s[0] == ' ')
        return false;
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || v > max)
        return false;
    *out = v;
    return true;
}

static void list_free(mo_cli_list *l)
{
    free(l->ns);
    free(l->name);
    for (size_t i = 0; i < l->naddrs; i++)
        free(l->addrs[i]);
    free(l->addrs);
}

void mo_cli_release(mo_options *o)
{
    for (size_t i = 0; i < o->nlists; i++)
        list_free(&o->lists[i]);
    free(o->lists);
    o->lists = NULL;
    o->nlists = 0;
}

/* NS/NAME=ADDR,ADDR... */
static bool parse_list(const char *flag, const char *v, mo_kind kind, mo_options *o, char *err,
                       size_t errlen)
{
    char why[MO_ADDR_MAX + 128];
    const char *slash = strchr(v, '/');
    const char *eq = strchr(v, '=');
    if (!slash || !eq || slash > eq) {
        snprintf(err, errlen, "%s '%s': expected NS/NAME=ADDR,ADDR... (e.g. %s "
                 "default/dijob-example-coordinator=127.0.0.1:22271)", flag, v, flag);
        return false;
    }
    mo_cli_list l = {0};
    l.kind = kind;
    l.ns = xstrndup(v, (size_t)(slash - v));
    l.name = xstrndup(slash + 1, (size_t)(eq - slash - 1));
    if (!mo_name_valid(l.ns, "the namespace", why, sizeof why) ||
        !mo_name_valid(l.name, "the name", why, sizeof why)) {
        snprintf(err, errlen, "%s '%s': %s", flag, v, why);
        list_free(&l);
        return false;
    }
    for (size_t i = 0; i < o->nlists; i++)
        if (o->lists[i].kind == kind && strcmp(o->lists[i].ns, l.ns) == 0 &&
            strcmp(o->lists[i].name, l.name) == 0) {
            snprintf(err, errlen, "%s: %s/%s is given twice; list all its addresses in one flag",
                     flag, l.ns, l.name);
            list_free(&l);
            return false;
        }
    const char *p = eq + 1;
    while (*p) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        char *addr = xstrndup(p, n);
        bool dup = false;
        for (size_t i = 0; i < l.naddrs; i++)
            dup = dup || strcmp(l.addrs[i], addr) == 0;
        if (!mo_addr_valid(addr, why, sizeof why) || dup || l.naddrs >= MO_LIST_MAX) {
            if (dup)
                snprintf(why, sizeof why, "address %s is listed twice", addr);
            else if (l.naddrs >= MO_LIST_MAX)
                snprintf(why, sizeof why, "more than %d addresses", MO_LIST_MAX);
            snprintf(err, errlen, "%s %s/%s: %s", flag, l.ns, l.name, why);
            free(addr);
            list_free(&l);
            return false;
        }
        l.addrs = xrealloc(l.addrs, (l.naddrs + 1) * sizeof *l.addrs);
        l.addrs[l.naddrs++] = addr;
        if (!comma)
            break;
        p = comma + 1;
        if (!*p) {
            snprintf(err, errlen, "%s %s/%s: the list ends with a comma", flag, l.ns, l.name);
            list_free(&l);
            return false;
        }
    }
    o->lists = xrealloc(o->lists, (o->nlists + 1) * sizeof *o->lists);
    o->lists[o->nlists++] = l;
    return true;
}

int mo_cli_parse(int argc, char **argv, mo_options *o, FILE *out, char *err, size_t errlen)
{
    memset(o, 0, sizeof *o);
    o->host = "127.0.0.1";
    o->journal_limit = DEFAULT_JOURNAL_LIMIT;
    o->log_level = ILOG_INFO;
    o->log_format = ILOG_HUMAN;
    o->on_failed = MO_FAILED_RECREATE;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--help") == 0) {
            mo_cli_usage(out);
            return MO_CLI_EXIT_OK;
        }
        if (strcmp(arg, "--version") == 0) {
            fprintf(out, "mock_operator %s\n", DILEARN_VERSION);
            return MO_CLI_EXIT_OK;
        }
        if (strcmp(arg, "--events-each-line") == 0) {
            o->events.each_line = true;
            continue;
        }
        /* Every other flag takes a value: "--flag value" or "--flag=value". */
        char flag[64];
        const char *v;
        const char *eq = strncmp(arg, "--", 2) == 0 ? strchr(arg, '=') : NULL;
        if (eq) {
            snprintf(flag, sizeof flag, "%.*s", (int)(eq - arg), arg);
            v = eq + 1;
        } else {
            snprintf(flag, sizeof flag, "%s", arg);
            v = NULL;
        }
        static const char *const known[] = {"--host",      "--port",          "--control-port",
                                            "--learners",  "--collectors",    "--on-failed",
                                            "--seed",      "--journal-limit", "--log-level",
                                            "--log-format"};
        size_t k = 0;
        while (k < sizeof known / sizeof known[0] && strcmp(flag, known[k]) != 0)
            k++;
        if (k == sizeof known / sizeof known[0] && !evt_cli_takes_value(flag)) {
            snprintf(err, errlen, "unknown option '%s' (see --help)", arg);
            mo_cli_release(o);
            return MO_CLI_USAGE;
        }
        if (!v) {
            if (i + 1 >= argc) {
                snprintf(err, errlen, "%s needs a value (see --help)", flag);
                mo_cli_release(o);
                return MO_CLI_USAGE;
            }
            v = argv[++i];
        }
        int evr = evt_cli_flag(&o->events, flag, v, err, errlen);
        if (evr < 0) {
            mo_cli_release(o);
            return MO_CLI_USAGE;
        }
        if (evr > 0)
            continue;
        unsigned long long n = 0;
        bool good = true;
        if (strcmp(flag, "--host") == 0) {
            good = *v != '\0';
            if (!good)
                snprintf(err, errlen, "--host is empty; give an address such as 127.0.0.1");
            o->host = v;
        } else if (strcmp(flag, "--port") == 0 || strcmp(flag, "--control-port") == 0) {
            good = parse_ulong(v, 65535, &n);
            if (!good)
                snprintf(err, errlen, "%s '%s' is not a port number (0-65535; 0 picks a free one)",
                         flag, v);
            else if (flag[2] == 'p')
                o->port = (int)n;
            else
                o->control_port = (int)n;
        } else if (strcmp(flag, "--learners") == 0 || strcmp(flag, "--collectors") == 0) {
            good = parse_list(flag, v, flag[2] == 'l' ? MO_LEARNERS : MO_COLLECTORS, o, err,
                              errlen);
        } else if (strcmp(flag, "--on-failed") == 0) {
            good = mo_failed_policy_parse(v, &o->on_failed);
            if (!good)
                snprintf(err, errlen, "--on-failed '%s' is neither recreate nor remove", v);
        } else if (strcmp(flag, "--seed") == 0) {
            good = parse_ulong(v, UINT64_MAX, &n);
            if (!good)
                snprintf(err, errlen, "--seed '%s' is not a non-negative integer", v);
            o->seed = n;
            o->seed_given = true;
        } else if (strcmp(flag, "--journal-limit") == 0) {
            good = parse_ulong(v, MO_JOURNAL_LIMIT_MAX, &n) && n >= 1;
            if (!good)
                snprintf(err, errlen, "--journal-limit '%s' is not an integer in 1-%d", v,
                         MO_JOURNAL_LIMIT_MAX);
            o->journal_limit = (size_t)n;
        } else if (strcmp(flag, "--log-level") == 0) {
            good = ilog_parse_level(v, &o->log_level);
            if (!good)
                snprintf(err, errlen, "--log-level '%s' is not debug, info, warn, error or off", v);
        } else if (strcmp(flag, "--log-format") == 0) {
            good = ilog_parse_format(v, &o->log_format);
            if (!good)
                snprintf(err, errlen, "--log-format '%s' is neither human nor json", v);
        }
        if (!good) {
            mo_cli_release(o);
            return MO_CLI_USAGE;
        }
    }
    if (o->port != 0 && o->port == o->control_port) {
        snprintf(err, errlen, "--port and --control-port are both %d; they must differ", o->port);
        mo_cli_release(o);
        return MO_CLI_USAGE;
    }
    return MO_CLI_RUN;
}

int mo_cli_apply(const mo_options *o, mo_registry *reg, char *err, size_t errlen)
{
    char why[MO_ADDR_MAX + 128];
    for (size_t i = 0; i < o->nlists; i++) {
        const mo_cli_list *l = &o->lists[i];
        mo_entry *e = mo_registry_ensure(reg, l->ns, l->name, why, sizeof why);
        if (!e) {
            snprintf(err, errlen, "--%s %s/%s: %s", mo_kind_name(l->kind), l->ns, l->name, why);
            return -1;
        }
        for (size_t j = 0; j < l->naddrs; j++)
            if (mo_entry_add(e, l->kind, l->addrs[j], why, sizeof why) < 0) {
                snprintf(err, errlen, "--%s %s/%s: %s", mo_kind_name(l->kind), l->ns, l->name,
                         why);
                return -1;
            }
    }
    return 0;
}
