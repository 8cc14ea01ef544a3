/* A program that forks while it holds a lock, run under valgrind with only the
 * suppressions the package ships (ffi-c/dist/etcdlock.supp) and without
 * --child-silent-after-fork: the child frees the handles it inherited (they
 * answer ETCDLOCK_CLOSED), does its own work on a client of its own, and exits
 * normally, so valgrind's leak check runs in both processes.
 * Usage: fork_child ENDPOINT. Exit 0 when every check passed. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "etcdlock.h"

static etcdlock_client *connect_to(const char *endpoint) {
    etcdlock_options o;
    etcdlock_client *c = NULL;
    if (etcdlock_options_init(&o, sizeof o) != ETCDLOCK_OK) return NULL;
    o.endpoints = endpoint;
    o.connect_timeout_ms = 30000; /* valgrind's start-up on a loaded machine */
    /* Valgrind runs a process's threads one at a time, many times slower:
     * on a loaded machine the parent's keep-alives can fall seconds behind
     * while the child works. This program checks leaks and handles across
     * fork, not renewal timing (the suites do that): a TTL with room. */
    o.ttl_secs = 60;
    if (etcdlock_client_connect(&o, &c) != ETCDLOCK_OK) {
        fprintf(stderr, "connect: %s\n", etcdlock_last_error_message());
        return NULL;
    }
    return c;
}

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    char name[64], other[64];
    snprintf(name, sizeof name, "fork-child-%d", (int)getpid());
    snprintf(other, sizeof other, "fork-child-%d-own", (int)getpid());
    etcdlock_client *c = connect_to(argv[1]);
    etcdlock_guard *g = NULL;
    if (!c || etcdlock_lock(c, name, 30000, &g) != ETCDLOCK_OK) {
        fprintf(stderr, "lock: %s\n", etcdlock_last_error_message());
        return 3;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) return 4;
    if (pid == 0) {
        int code = 0;
        if (etcdlock_unlock(g) != ETCDLOCK_CLOSED) code |= 1; /* the parent's hold is not ours */
        etcdlock_guard_free(g);
        etcdlock_client_free(c);
        etcdlock_client *mine = connect_to(argv[1]);
        etcdlock_guard *g2 = NULL;
        if (!mine) code |= 2;
        if (mine && etcdlock_lock(mine, other, 30000, &g2) != ETCDLOCK_OK) code |= 4;
        if (g2 && etcdlock_unlock(g2) != ETCDLOCK_OK) code |= 8;
        etcdlock_guard_free(g2);
        etcdlock_client_free(mine);
        etcdlock_shutdown();
        if (code) fprintf(stderr, "child: checks failed (bits %d)\n", code);
        exit(code); /* a normal exit: valgrind checks this process's leaks too */
    }
    int status = 0;
    if (waitpid(pid, &status, 0) != pid) return 5;
    int code = 0;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "child: status %d\n", status);
        code = 6;
    }
    int held = 0;
    if (etcdlock_guard_is_held(g, &held) != ETCDLOCK_OK || !held) {
        fprintf(stderr, "parent: the hold was lost while the child ran\n");
        code = 7;
    }
    if (etcdlock_unlock(g) != ETCDLOCK_OK) {
        fprintf(stderr, "parent: unlock: %s\n", etcdlock_last_error_message());
        code = 8;
    }
    etcdlock_guard_free(g);
    etcdlock_client_free(c);
    etcdlock_shutdown();
    return code;
}
