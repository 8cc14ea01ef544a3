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

static int harness_start(etcd_harness *h) {
    int in[2], out[2];
    memset(h, 0, sizeof *h);
    if (pipe(in) || pipe(out)) return -1;
    h->pid = fork();
    if (h->pid < 0) return -1;
    if (h->pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        close(in[0]); close(in[1]); close(out[0]); close(out[1]);
        execl(harness_path(), "etcd-harness", (char *)NULL);
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
    /* {"endpoints":["http://127.0.0.1:PORT"],...}: take the first endpoint. */
    const char *e = strstr(line, "\"endpoints\":[\"");
    if (!e) return -1;
    e += strlen("\"endpoints\":[\"");
    const char *end = strchr(e, '"');
    if (!end || (size_t)(end - e) >= sizeof h->endpoint) return -1;
    memcpy(h->endpoint, e, (size_t)(end - e));
    h->endpoint[end - e] = '\0';
    return 0;
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
