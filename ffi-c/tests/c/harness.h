/* Start a real etcd through the testkit's etcd-harness binary and stop it again.
 * Shared by the C test suite and the C benchmark. The harness prints one JSON
 * line with the endpoints and stops etcd when its stdin closes. */
#ifndef ETCDLOCK_TEST_HARNESS_H
#define ETCDLOCK_TEST_HARNESS_H

#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct {
    pid_t pid;
    int to_harness;   /* write end of its stdin; closing it stops etcd */
    FILE *from_harness;
    char endpoint[256];
} etcd_harness;

/* Path of etcd-harness: $ETCDLOCK_HARNESS, else target/debug/etcd-harness. */
static const char *harness_path(void) {
    const char *p = getenv("ETCDLOCK_HARNESS");
    return (p && *p) ? p : "target/debug/etcd-harness";
}

/* Start a cluster of `members` (1: a single etcd); h->endpoint gets every
 * member's endpoint, comma separated. */
static int harness_start_members(etcd_harness *h, int members) {
    int in[2], out[2];
    char n[16];
    snprintf(n, sizeof n, "%d", members);
    memset(h, 0, sizeof *h);
    if (pipe(in) || pipe(out)) return -1;
    h->pid = fork();
    if (h->pid < 0) return -1;
    if (h->pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        close(in[0]); close(in[1]); close(out[0]); close(out[1]);
        execl(harness_path(), "etcd-harness", "--members", n, (char *)NULL);
        fprintf(stderr, "cannot exec %s\n", harness_path());
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    h->to_harness = in[1];
    h->from_harness = fdopen(out[0], "r");
    char line[4096];
    if (!h->from_harness || !fgets(line, sizeof line, h->from_harness)) {
        fprintf(stderr, "etcd-harness printed nothing (path %s)\n", harness_path());
        return -1;
    }
    /* {"endpoints":["http://127.0.0.1:PORT",...],...}: every endpoint, comma separated. */
    const char *e = strstr(line, "\"endpoints\":[");
    if (!e) return -1;
    e += strlen("\"endpoints\":[");
    const char *close_br = strchr(e, ']');
    if (!close_br) return -1;
    size_t used = 0;
    while (e < close_br) {
        const char *q = strchr(e, '"');
        if (!q || q >= close_br) break;
        const char *end = strchr(q + 1, '"');
        if (!end) return -1;
        size_t len = (size_t)(end - q - 1);
        if (used + len + 2 >= sizeof h->endpoint) return -1;
        if (used) h->endpoint[used++] = ',';
        memcpy(h->endpoint + used, q + 1, len);
        used += len;
        e = end + 1;
    }
    h->endpoint[used] = '\0';
    return used ? 0 : -1;
}

static int harness_start(etcd_harness *h) { return harness_start_members(h, 1); }

/* Send one command line to the harness; its one-line answer goes to reply. */
static int harness_command(etcd_harness *h, const char *cmd, char *reply, size_t n) {
    size_t len = strlen(cmd);
    if (write(h->to_harness, cmd, len) != (ssize_t)len || write(h->to_harness, "\n", 1) != 1) return -1;
    return fgets(reply, (int)n, h->from_harness) ? 0 : -1;
}

static void harness_stop(etcd_harness *h) {
    if (h->to_harness > 0) close(h->to_harness);
    if (h->from_harness) fclose(h->from_harness);
    if (h->pid > 0) waitpid(h->pid, NULL, 0);
    h->pid = 0;
    h->to_harness = 0;
    h->from_harness = NULL;
}

#endif
