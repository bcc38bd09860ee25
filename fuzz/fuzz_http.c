/* fuzz_http: the HTTP request handling of the slave and master ends, through
 * a real aggregator (agg_new, no learners) on a fresh loop per input: the
 * first byte picks the coordinator side (slave: /connect, /task/new, ...) or
 * the learner side (master: /slave/heartbeat, reports, /metrics); the rest
 * is written as raw bytes to a TCP connection to it, the write side is shut,
 * and the loop runs until the server closes the connection (capped). Several
 * requests in one input are pipelined, so that /connect then /task/new with
 * the same token reach the task code. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agg.h"
#include "agg_config.h"
#include "ev.h"
#include "ilog.h"
#include "jsonx.h"

static agg_config cfg;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    signal(SIGPIPE, SIG_IGN);
    ilog_init("fuzz_http", getenv("FUZZ_HTTP_LOG") ? ILOG_DEBUG : ILOG_OFF, ILOG_HUMAN);
    char *args[] = {"aggregator", "--slave-port", "0", "--master-port", "0", "--max-retry-ms", "100",
                    "--retry-interval-ms", "50", "--task-deadline-ms", "1000", NULL};
    char err[512];
    if (agg_config_from_args(&cfg, 11, args, err, sizeof err) != AGG_CONFIG_OK) {
        fprintf(stderr, "fuzz_http: config: %s\n", err);
        abort();
    }
    return 0;
}

static void on_ready(void *ud, agg *a)
{
    (void)ud;
    (void)a;
}

static int port_of(const char *line, const char *key)
{
    cJSON *j = jsonx_parse(line, strlen(line), NULL, 0);
    int64_t v = -1;
    if (!j || !jsonx_get_i64(jsonx_get(j, key), &v))
        v = -1;
    cJSON_Delete(j);
    return (int)v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 65536)
        return 0;
    ev_loop *loop = ev_loop_new();
    if (!loop)
        abort();
    char err[512];
    agg *a = agg_new(loop, &cfg, on_ready, NULL, err, sizeof err);
    if (!a) {
        fprintf(stderr, "fuzz_http: agg_new: %s\n", err);
        abort();
    }
    char *line = agg_ready_line(a);
    int port = port_of(line, (data[0] & 1) ? "master_port" : "slave_port");
    free(line);
    if (port <= 0)
        abort();

    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0)
        abort();
    fcntl(fd, F_SETFL, O_NONBLOCK);
    const char *p = (const char *)data + 1;
    size_t left = size - 1;
    bool eof = false;
    char buf[65536];
    uint64_t end = ev_now_ms() + 300;
    while (!eof && ev_now_ms() < end) {
        if (left > 0) {
            ssize_t w = write(fd, p, left);
            if (w > 0) {
                p += w;
                left -= (size_t)w;
            } else if (w < 0 && errno != EAGAIN && errno != EINTR) {
                left = 0;
            }
            if (left == 0)
                shutdown(fd, SHUT_WR);
        }
        ev_run_once(loop, 1);
        for (;;) {
            ssize_t r = read(fd, buf, sizeof buf);
            if (r > 0)
                continue;
            if (r == 0 || (errno != EAGAIN && errno != EINTR))
                eof = true;
            break;
        }
    }
    close(fd);
    /* Let the server see the close and whatever the requests started run a
     * little (reports to the master address given in /connect, and so on). */
    for (int i = 0; i < 3; i++)
        ev_run_once(loop, 0);
    agg_free(a);
    ev_loop_free(loop);
    return 0;
}
