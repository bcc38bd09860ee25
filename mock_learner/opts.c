/* opts: the mock learner's command line. */
#include "opts.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "fault.h"
#include "slave.h"
#include "xalloc.h"
#include "util.h"

#define DEFAULT_BATCH 8
#define MAX_MS 86400000L

enum {
    O_COUNT = 256, O_BASE_PORT, O_HOST, O_BATCH, O_BATCHES, O_LEARN, O_LEARNS, O_CONTROL, O_CHANNEL, O_HB,
    O_PREFIX, O_ID_BASE, O_ALLOW_MASTER, O_DUMP, O_SEED, O_FAULT, O_LEVEL, O_FORMAT, O_HELP, O_VERSION,
    O_LABEL, O_EVENTS, O_EVENTS_LEARNER,
};

static const struct option long_opts[] = {
    {"count", required_argument, NULL, O_COUNT},
    {"base-port", required_argument, NULL, O_BASE_PORT},
    {"host", required_argument, NULL, O_HOST},
    {"batch-size", required_argument, NULL, O_BATCH},
    {"batch-sizes", required_argument, NULL, O_BATCHES},
    {"learn-time-ms", required_argument, NULL, O_LEARN},
    {"learn-times-ms", required_argument, NULL, O_LEARNS},
    {"control-port", required_argument, NULL, O_CONTROL},
    {"channel", required_argument, NULL, O_CHANNEL},
    {"heartbeat-span-ms", required_argument, NULL, O_HB},
    {"id-prefix", required_argument, NULL, O_PREFIX},
    {"id-base", required_argument, NULL, O_ID_BASE},
    {"allow-master", required_argument, NULL, O_ALLOW_MASTER},
    {"label-prefix", required_argument, NULL, O_LABEL},
    {"events", required_argument, NULL, O_EVENTS},
    {"events-max-bytes", required_argument, NULL, O_EVENTS},
    {"events-flush-ms", required_argument, NULL, O_EVENTS},
    {"events-each-line", no_argument, NULL, O_EVENTS},
    {"events-learner", required_argument, NULL, O_EVENTS_LEARNER},
    {"dump", required_argument, NULL, O_DUMP},
    {"seed", required_argument, NULL, O_SEED},
    {"fault", required_argument, NULL, O_FAULT},
    {"log-level", required_argument, NULL, O_LEVEL},
    {"log-format", required_argument, NULL, O_FORMAT},
    {"help", no_argument, NULL, O_HELP},
    {"version", no_argument, NULL, O_VERSION},
    {NULL, 0, NULL, 0},
};

void opts_help(FILE *out)
{
    fprintf(out,
            "usage: mock_learner --count N [options]\n"
            "\n"
            "Runs N mock DI-engine learners (slaves of the interaction protocol) in one\n"
            "process on one event loop, with fault injection. Learner k is named\n"
            "<prefix><base+k> (k from 0). Once every learner that should listen listens, one\n"
            "line is printed on stdout:\n"
            "  {\"ready\": true, \"control_port\": P, \"learners\": [{\"id\": \"learner0\", \"port\": P}, ...]}\n"
            "\n"
            "Options:\n"
            "  --count N               number of learners (1..%d; required)\n"
            "  --base-port P           learner k listens on P+k (default: each on a free port)\n"
            "  --host H                address the learners and the control API listen on\n"
            "                          (default 127.0.0.1)\n"
            "  --batch-size B          batch size of every learner (default %d)\n"
            "  --batch-sizes B0,B1,..  one batch size per learner (N values)\n"
            "  --learn-time-ms MS      time a learn task takes (default 0)\n"
            "  --learn-times-ms T0,..  one learn time per learner (N values)\n"
            "  --control-port P        control API port (default 0: a free port)\n"
            "  --channel N             the learners' channel (default 0)\n"
            "  --heartbeat-span-ms MS  heartbeat period (default 3000)\n"
            "  --id-prefix S           learner id prefix (default learner; [A-Za-z0-9_.-], at most %d)\n"
            "  --id-base N             number of the first learner (default 0): with --id-base 4\n"
            "                          the learners are learner4, learner5, ..., so that several\n"
            "                          processes give unique ids; faults and the control API\n"
            "                          name a learner by its index (from 0) or its id\n"
            "  --allow-master ADDR[/PREFIX],...\n"
            "                          who may connect as master (repeatable; IPv4 and IPv6):\n"
            "                          a /connect from another address, or naming a master\n"
            "                          address (an IP literal) outside the list, is refused\n"
            "                          with 403 (code 503). Default: anyone, with a warning\n"
            "                          when --host is not loopback\n"
            "  --label-prefix S        learner k's label in events is <S>k (default: its id)\n"
            "  --dump FILE             append JSON lines: each learn data item received and each\n"
            "                          result sent\n"
            "  --seed S                seed of the fault draws (\"prob\"; default 0)\n"
            "  --fault JSON            a fault object (repeatable; see below)\n"
            "  --log-level L           debug, info, warn, error or off (default info)\n"
            "  --log-format F          human or json (default human)\n"
            EVT_CLI_HELP
            "  --events-learner FMT    the \"learner\" of its events: FMT with {id} and {port}\n"
            "                          replaced (default {id}); the id the aggregator knows it\n"
            "                          by, e.g. {id}.localhost:{port} when an operator lists it\n"
            "  --help                  this text\n"
            "  --version               the version\n"
            "\n"
            "Fault object: {\"learner\": 2 | \"learner2\" | \"all\" (default all), \"kind\": K,\n"
            "  \"task\": NAME (default any task; \"learn\" is short for learner_learn_task,\n"
            "  likewise resource, start, get_data, close), \"at\": k (from the k-th task of\n"
            "  that name on that learner, 1-based; default every one), \"times\": n (n tasks\n"
            "  in a row from at, default 1: \"at\": 2, \"times\": 3 fires on the 2nd, 3rd and\n"
            "  4th, later ones pass), \"prob\": p (0..1, drawn from --seed), \"optional\": b\n"
            "  (need not fire; for the scenario runner's verdict), ...the kind's\n"
            "  parameters}. State kinds (slow_join, refuse, die, drop, no_heartbeat) act\n"
            "  at once when they have none of task/at/times/prob (at start-up with\n"
            "  --fault), else on a matching task. Kinds:\n",
            OPTS_MAX_COUNT, DEFAULT_BATCH, OPTS_PREFIX_MAX);
    for (int k = 0; k < FK_COUNT; k++) {
        /* The doc wrapped at 79 columns under a 16-column indent. */
        const char *d = fault_kind_doc((fault_kind)k);
        fprintf(out, "  %-13s ", fault_kind_name((fault_kind)k));
        while (*d) {
            size_t n = strlen(d);
            if (n > 63) {
                n = 63;
                while (n > 0 && d[n] != ' ')
                    n--;
                if (n == 0)
                    n = 63;
            }
            fprintf(out, "%.*s\n", (int)n, d);
            d += n;
            while (*d == ' ')
                d++;
            if (*d)
                fprintf(out, "%16s", "");
        }
    }
    fprintf(out,
            "When several fire on one task: crash before > error_status > die > drop >\n"
            "crash during > hang > fail > malformed > truncated; delays add up.\n"
            "\n"
            "Control API (JSON over HTTP on the control port):\n"
            "  GET /state, GET /fault, POST /fault (an object or a list), DELETE /fault\n"
            "  (clear all and lift held learners and paused heartbeats), DELETE /fault/<id>,\n"
            "  POST /learner/<k>/<drop|die|refuse|no_heartbeat|resume> (drop body:\n"
            "  {\"back_after_ms\": T}).\n"
            "\n"
            "Exit codes: 0 after SIGTERM or SIGINT, 1 runtime failure, 2 usage error,\n"
            "3 an injected crash.\n");
}

static bool parse_long(const char *flag, const char *s, long lo, long hi, long *out, char *err, size_t errlen)
{
    int64_t v;
    if (!util_parse_i64(s, LONG_MIN, LONG_MAX, &v)) {
        snprintf(err, errlen, "%s: '%.64s' is not an integer", flag, s);
        return false;
    }
    if (v < lo || v > hi) {
        snprintf(err, errlen, "%s: %lld is out of range %ld..%ld", flag, (long long)v, lo, hi);
        return false;
    }
    *out = (long)v;
    return true;
}

/* A comma-separated list of integers into a fresh array. */
static long *parse_list(const char *flag, const char *s, long lo, long hi, size_t *n, char *err, size_t errlen)
{
    size_t cap = 1;
    for (const char *p = s; *p; p++)
        cap += *p == ',';
    long *v = xcalloc(cap, sizeof *v);
    *n = 0;
    const char *p = s;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        char item[32];
        if (len == 0 || len >= sizeof item) {
            snprintf(err, errlen, "%s: item %zu of '%.64s' is %s", flag, *n + 1, s, len ? "too long" : "empty");
            free(v);
            return NULL;
        }
        memcpy(item, p, len);
        item[len] = '\0';
        char e[200];
        if (!parse_long(flag, item, lo, hi, &v[*n], e, sizeof e)) {
            snprintf(err, errlen, "%s (item %zu)", e, *n + 1);
            free(v);
            return NULL;
        }
        (*n)++;
        if (!comma)
            break;
        p = comma + 1;
    }
    return v;
}

int opts_parse(opts *o, int argc, char **argv, char *err, size_t errlen)
{
    memset(o, 0, sizeof *o);
    o->host = "127.0.0.1";
    o->heartbeat_span_ms = 3000;
    o->id_prefix = "learner";
    o->log_level = ILOG_INFO;
    o->log_format = ILOG_HUMAN;
    long batch = DEFAULT_BATCH, learn = 0, v;
    const char *batches = NULL, *learns = NULL;
    bool have_batch = false, have_learn = false;
    o->faults = xcalloc((size_t)argc + 1, sizeof *o->faults);
    opterr = 0;
    optind = 1;
    int c;
    int li = 0;
    while ((c = getopt_long(argc, argv, ":", long_opts, &li)) != -1) {
        const char *flag = optind > 1 ? argv[optind - 1] : "?";
        switch (c) {
        case O_COUNT:
            if (!parse_long("--count", optarg, 1, OPTS_MAX_COUNT, &v, err, errlen))
                return -1;
            o->count = (int)v;
            break;
        case O_BASE_PORT:
            if (!parse_long("--base-port", optarg, 1, 65535, &v, err, errlen))
                return -1;
            o->base_port = (int)v;
            break;
        case O_HOST:
            if (!*optarg) {
                snprintf(err, errlen, "--host: the address is empty");
                return -1;
            }
            o->host = optarg;
            break;
        case O_BATCH:
            if (!parse_long("--batch-size", optarg, 1, OPTS_MAX_BATCH, &batch, err, errlen))
                return -1;
            have_batch = true;
            break;
        case O_BATCHES:
            batches = optarg;
            break;
        case O_LEARN:
            if (!parse_long("--learn-time-ms", optarg, 0, MAX_MS, &learn, err, errlen))
                return -1;
            have_learn = true;
            break;
        case O_LEARNS:
            learns = optarg;
            break;
        case O_CONTROL:
            if (!parse_long("--control-port", optarg, 0, 65535, &v, err, errlen))
                return -1;
            o->control_port = (int)v;
            break;
        case O_CHANNEL:
            if (!parse_long("--channel", optarg, 0, INT_MAX, &v, err, errlen))
                return -1;
            o->channel = (int)v;
            break;
        case O_HB:
            if (!parse_long("--heartbeat-span-ms", optarg, 1, 3600000L, &o->heartbeat_span_ms, err, errlen))
                return -1;
            break;
        case O_PREFIX: {
            size_t n = strlen(optarg);
            if (n == 0 || n > OPTS_PREFIX_MAX ||
                strspn(optarg, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") != n) {
                snprintf(err, errlen, "--id-prefix: '%.80s' must be 1..%d characters of [A-Za-z0-9_.-]", optarg,
                         OPTS_PREFIX_MAX);
                return -1;
            }
            o->id_prefix = optarg;
            break;
        }
        case O_ID_BASE:
            if (!parse_long("--id-base", optarg, 0, OPTS_MAX_ID_BASE, &v, err, errlen))
                return -1;
            o->id_base = (int)v;
            break;
        case O_ALLOW_MASTER:
            if (slave_allow_flag(&o->allow_master, optarg, err, errlen) < 0)
                return -1;
            break;
        case O_DUMP:
            if (!*optarg) {
                snprintf(err, errlen, "--dump: the file name is empty");
                return -1;
            }
            o->dump_path = optarg;
            break;
        case O_SEED: {
            char *end;
            errno = 0;
            unsigned long long s = strtoull(optarg, &end, 10);
            if (errno || end == optarg || *end || optarg[0] == '-') {
                snprintf(err, errlen, "--seed: '%.64s' is not an unsigned integer", optarg);
                return -1;
            }
            o->seed = s;
            break;
        }
        case O_FAULT:
            o->faults[o->nfaults++] = optarg;
            break;
        case O_LABEL:
            if (!*optarg || strlen(optarg) > OPTS_PREFIX_MAX) {
                snprintf(err, errlen, "--label-prefix: '%.80s' must be 1..%d characters", optarg, OPTS_PREFIX_MAX);
                return -1;
            }
            o->label_prefix = optarg;
            break;
        case O_EVENTS_LEARNER:
            if (!*optarg || strlen(optarg) > OPTS_PREFIX_MAX) {
                snprintf(err, errlen, "--events-learner: '%.80s' must be 1..%d characters", optarg, OPTS_PREFIX_MAX);
                return -1;
            }
            o->events_learner = optarg;
            break;
        case O_EVENTS: {
            char name[32];
            snprintf(name, sizeof name, "--%s", long_opts[li].name);
            if (evt_cli_flag(&o->events, name, optarg, err, errlen) < 0)
                return -1;
            break;
        }
        case O_LEVEL:
            if (!ilog_parse_level(optarg, &o->log_level)) {
                snprintf(err, errlen, "--log-level: '%.64s' is not one of debug, info, warn, error, off", optarg);
                return -1;
            }
            break;
        case O_FORMAT:
            if (!ilog_parse_format(optarg, &o->log_format)) {
                snprintf(err, errlen, "--log-format: '%.64s' is not human or json", optarg);
                return -1;
            }
            break;
        case O_HELP:
            o->help = true;
            return 0;
        case O_VERSION:
            o->version = true;
            return 0;
        case ':':
            snprintf(err, errlen, "%s: a value is missing", flag);
            return -1;
        default:
            snprintf(err, errlen, "unknown flag '%s'", flag);
            return -1;
        }
    }
    if (optind < argc) {
        snprintf(err, errlen, "unexpected argument '%s' (every option is a --flag)", argv[optind]);
        return -1;
    }
    if (o->count == 0) {
        snprintf(err, errlen, "--count is required (the number of learners)");
        return -1;
    }
    if (o->base_port && o->base_port + o->count - 1 > 65535) {
        snprintf(err, errlen, "--base-port: %d + %d learners passes port 65535", o->base_port, o->count);
        return -1;
    }
    if (batches && have_batch) {
        snprintf(err, errlen, "--batch-size and --batch-sizes exclude each other");
        return -1;
    }
    if (learns && have_learn) {
        snprintf(err, errlen, "--learn-time-ms and --learn-times-ms exclude each other");
        return -1;
    }
    o->batch_sizes = xcalloc((size_t)o->count, sizeof *o->batch_sizes);
    o->learn_times_ms = xcalloc((size_t)o->count, sizeof *o->learn_times_ms);
    for (int k = 0; k < o->count; k++) {
        o->batch_sizes[k] = (int)batch;
        o->learn_times_ms[k] = learn;
    }
    const char *lflag[2] = {"--batch-sizes", "--learn-times-ms"};
    const char *ltext[2] = {batches, learns};
    for (int i = 0; i < 2; i++) {
        if (!ltext[i])
            continue;
        size_t n;
        long *vals = parse_list(lflag[i], ltext[i], i == 0 ? 1 : 0, i == 0 ? OPTS_MAX_BATCH : MAX_MS, &n, err,
                                errlen);
        if (!vals)
            return -1;
        if (n != (size_t)o->count) {
            snprintf(err, errlen, "%s: %zu values for --count %d learners (give one per learner)", lflag[i], n,
                     o->count);
            free(vals);
            return -1;
        }
        for (int k = 0; k < o->count; k++) {
            if (i == 0)
                o->batch_sizes[k] = (int)vals[k];
            else
                o->learn_times_ms[k] = vals[k];
        }
        free(vals);
    }
    return 0;
}

void opts_free(opts *o)
{
    free(o->batch_sizes);
    free(o->learn_times_ms);
    free(o->faults);
    slave_allow_free(o->allow_master);
    memset(o, 0, sizeof *o);
}
