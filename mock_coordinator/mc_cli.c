/* mc_cli: command-line parsing with checked numbers. */
#include "mc_cli.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "mc_items.h"
#include "xalloc.h"

void mc_cli_usage(FILE *out)
{
    fputs("usage: mock_coordinator --connect HOST:PORT [options]\n"
          "\n"
          "A DI-engine coordinator stand-in: connects to an aggregator (or one learner)\n"
          "as the master named \"aggregator\", drives a training run and checks it.\n"
          "Prints one JSON summary on stdout; exit 0 all held, 1 a check failed, 2 usage.\n"
          "\n"
          "  --connect HOST:PORT     the slave to drive (IPv6: [::1]:PORT); required\n"
          "  --rounds R              get-data + learn rounds of the default run (3)\n"
          "  --script FILE           run the tasks of a JSON script instead\n"
          "  --expect-learners N     resource must answer {\"gpu\": N}\n"
          "  --dump FILE             a mock_learner --dump file; repeat for several;\n"
          "                          enables the exactly-once, order and merge checks\n"
          "  --task-deadline-ms MS   deadline of each task (30000 x time scale)\n"
          "  --port P                port of this master (0: any free one)\n"
          "  --host H                address of this master (127.0.0.1)\n"
          "  --channel N             protocol channel (0)\n"
          "  --time-scale F          multiply every default timing by F (1)\n"
          "  --seed S                seed of the task ids and the learn data (1)\n"
          "  --item-size BYTES       pad each learn item to about BYTES of JSON\n"
          "  --no-close              do not send learner_close_task\n"
          "  --log-level L           debug|info|warn|error|off (info), to stderr\n"
          "  --log-format F          human|json (human)\n"
          EVT_CLI_HELP
          "  --help, --version\n",
          out);
}

static bool parse_long(const char *s, long lo, long hi, long *out)
{
    if (!s || !*s || isspace((unsigned char)*s))
        return false;
    errno = 0;
    char *end;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < lo || v > hi)
        return false;
    *out = v;
    return true;
}

static bool parse_hostport(const char *s, mc_config *cfg)
{
    const char *colon;
    size_t hl;
    const char *h = s;
    if (*s == '[') {
        const char *rb = strchr(s, ']');
        if (!rb || rb[1] != ':')
            return false;
        h = s + 1;
        hl = (size_t)(rb - h);
        colon = rb + 1;
    } else {
        colon = strrchr(s, ':');
        if (!colon || memchr(s, ':', (size_t)(colon - s)))
            return false;
        hl = (size_t)(colon - s);
    }
    if (hl == 0 || hl >= sizeof cfg->connect_host)
        return false;
    long port;
    if (!parse_long(colon + 1, 1, 65535, &port))
        return false;
    memcpy(cfg->connect_host, h, hl);
    cfg->connect_host[hl] = '\0';
    cfg->connect_port = (int)port;
    return true;
}

static mc_cli_action usage_err(char *err, size_t errlen, const char *flag, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static mc_cli_action usage_err(char *err, size_t errlen, const char *flag, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(err, errlen, "%s: %s", flag, msg);
    return MC_CLI_USAGE;
}

mc_cli_action mc_cli_parse(int argc, char **argv, mc_config *cfg, char *err, size_t errlen)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->rounds = 3;
    cfg->expect_learners = -1;
    cfg->host = "127.0.0.1";
    cfg->time_scale = 1.0;
    cfg->seed = 1;
    cfg->log_level = ILOG_INFO;
    cfg->log_format = ILOG_HUMAN;
    err[0] = '\0';
    static const char *const with_value[] = {"--connect", "--rounds", "--script", "--expect-learners", "--dump",
                                             "--task-deadline-ms", "--port", "--host", "--channel", "--time-scale",
                                             "--seed", "--item-size", "--log-level", "--log-format", NULL};
    /* --help and --version win wherever they are. */
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return MC_CLI_HELP;
        if (strcmp(argv[i], "--version") == 0)
            return MC_CLI_VERSION;
    }
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--no-close") == 0) {
            cfg->no_close = true;
            continue;
        }
        if (strcmp(arg, "--events-each-line") == 0) {
            cfg->events.each_line = true;
            continue;
        }
        char flag[64];
        const char *val = NULL;
        const char *eq = strchr(arg, '=');
        size_t fl = eq ? (size_t)(eq - arg) : strlen(arg);
        if (fl >= sizeof flag)
            fl = sizeof flag - 1;
        memcpy(flag, arg, fl);
        flag[fl] = '\0';
        bool known = false;
        for (const char *const *k = with_value; *k; k++)
            known |= strcmp(*k, flag) == 0;
        known |= evt_cli_takes_value(flag);
        if (!known) {
            if (strcmp(flag, "--no-close") == 0)
                return usage_err(err, errlen, "--no-close", "takes no value");
            return usage_err(err, errlen, arg, "unknown option (see --help)");
        }
        if (eq) {
            val = eq + 1;
        } else {
            if (i + 1 >= argc)
                return usage_err(err, errlen, flag, "needs a value");
            val = argv[++i];
        }
        long v;
        char eerr[256];
        int ev = evt_cli_flag(&cfg->events, flag, val, eerr, sizeof eerr);
        if (ev < 0)
            return usage_err(err, errlen, flag, "%s", eerr + strlen(flag) + 2);
        if (ev > 0)
            continue;
        if (strcmp(flag, "--connect") == 0) {
            if (!parse_hostport(val, cfg))
                return usage_err(err, errlen, flag, "\"%.200s\" is not HOST:PORT (port 1-65535; IPv6 as [::1]:PORT)",
                                 val);
            cfg->target = val;
        } else if (strcmp(flag, "--rounds") == 0) {
            if (!parse_long(val, 0, MC_ROUNDS_MAX, &v))
                return usage_err(err, errlen, flag, "\"%.100s\" is not an integer from 0 to 1000000", val);
            cfg->rounds = v;
            cfg->rounds_given = true;
        } else if (strcmp(flag, "--script") == 0) {
            if (!*val)
                return usage_err(err, errlen, flag, "needs a file name");
            cfg->script = val;
        } else if (strcmp(flag, "--expect-learners") == 0) {
            if (!parse_long(val, 0, 1000000, &v))
                return usage_err(err, errlen, flag, "\"%.100s\" is not an integer from 0 to 1000000", val);
            cfg->expect_learners = v;
        } else if (strcmp(flag, "--dump") == 0) {
            if (!*val)
                return usage_err(err, errlen, flag, "needs a file name");
            if (cfg->ndumps >= MC_DUMPS_MAX)
                return usage_err(err, errlen, flag, "given more than 256 times");
            cfg->dumps = xrealloc(cfg->dumps, (cfg->ndumps + 1) * sizeof *cfg->dumps);
            cfg->dumps[cfg->ndumps++] = val;
        } else if (strcmp(flag, "--task-deadline-ms") == 0) {
            if (!parse_long(val, 1, 86400000L, &v))
                return usage_err(err, errlen, flag, "\"%.100s\" is not a number of milliseconds from 1 to 86400000",
                                 val);
            cfg->task_deadline_ms = v;
        } else if (strcmp(flag, "--port") == 0) {
            if (!parse_long(val, 0, 65535, &v))
                return usage_err(err, errlen, flag, "\"%.100s\" is not a port from 0 to 65535", val);
            cfg->port = (int)v;
        } else if (strcmp(flag, "--host") == 0) {
            if (!*val)
                return usage_err(err, errlen, flag, "needs an address");
            cfg->host = val;
        } else if (strcmp(flag, "--channel") == 0) {
            if (!parse_long(val, -2147483647L - 1, 2147483647L, &v))
                return usage_err(err, errlen, flag, "\"%.100s\" is not an integer channel", val);
            cfg->channel = (int)v;
        } else if (strcmp(flag, "--time-scale") == 0) {
            errno = 0;
            char *end;
            double d = strtod(val, &end);
            if (!*val || *end || errno || !isfinite(d) || d <= 0 || d > 1000)
                return usage_err(err, errlen, flag, "\"%.100s\" is not a number above 0 and at most 1000", val);
            cfg->time_scale = d;
        } else if (strcmp(flag, "--seed") == 0) {
            errno = 0;
            char *end;
            if (!*val || !isdigit((unsigned char)*val))
                return usage_err(err, errlen, flag, "\"%.100s\" is not a non-negative integer", val);
            unsigned long long s = strtoull(val, &end, 10);
            if (*end || errno)
                return usage_err(err, errlen, flag, "\"%.100s\" is not a non-negative integer below 2^64", val);
            cfg->seed = s;
        } else if (strcmp(flag, "--item-size") == 0) {
            if (!parse_long(val, 0, (long)MCI_ITEM_SIZE_MAX, &v))
                return usage_err(err, errlen, flag, "\"%.100s\" is not a byte count from 0 to 67108864", val);
            cfg->item_size = (size_t)v;
        } else if (strcmp(flag, "--log-level") == 0) {
            if (!ilog_parse_level(val, &cfg->log_level))
                return usage_err(err, errlen, flag, "\"%.100s\" is not one of debug, info, warn, error, off", val);
        } else if (strcmp(flag, "--log-format") == 0) {
            if (!ilog_parse_format(val, &cfg->log_format))
                return usage_err(err, errlen, flag, "\"%.100s\" is not human or json", val);
        }
    }
    if (!cfg->target)
        return usage_err(err, errlen, "--connect", "is required (HOST:PORT of the aggregator or learner to drive)");
    if (cfg->script && cfg->rounds_given)
        return usage_err(err, errlen, "--rounds", "cannot be used with --script: the script lists the tasks");
    if (cfg->script && cfg->no_close)
        return usage_err(err, errlen, "--no-close", "cannot be used with --script: the script lists the tasks");
    return MC_CLI_RUN;
}

void mc_cli_free(mc_config *cfg)
{
    free(cfg->dumps);
    cfg->dumps = NULL;
    cfg->ndumps = 0;
}

long mc_scaled_ms(const mc_config *cfg, long base_ms)
{
    double v = (double)base_ms * cfg->time_scale;
    if (v < 1)
        return 1;
    if (v > 86400000.0)
        return 86400000L;
    return (long)v;
}
