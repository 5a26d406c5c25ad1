/* Killing a private PostgreSQL server the way a power cut or an OOM kill
 * would, and starting it again, for crash tests (tests/pg/crash_pg.c, the
 * model-checked history test). Header only: static functions, libc only.
 *
 * The server is the one tests/pg/pgserver.sh made: its data directory is
 * $OST_TEST_PG_DIR/data, and $OST_TEST_PG_START / $OST_TEST_PG_STOP are
 * shell commands that start and stop it (pg_ctl -w).
 *
 * Why a subreaper: pg_ctl daemonizes the postmaster (its parent, pg_ctl,
 * exits), so a postmaster is reparented to PID 1, or to the nearest
 * ancestor that made itself a "child subreaper" (prctl(2),
 * PR_SET_CHILD_SUBREAPER). A postmaster killed with SIGKILL stays a zombie
 * until its parent reaps it, and pg_ctl start refuses to start a server
 * while the pid in postmaster.pid is still alive (kill(pid, 0) succeeds on
 * a zombie). On a machine whose PID 1 reaps orphans late, a restart then
 * fails. So a test that kills the server first calls pgkill_adopt(): it
 * makes the process a subreaper, then stops the server pgserver.sh started
 * (whose postmaster is not ours) and starts it again, so that the
 * postmaster and every backend it forks end up as our descendants, and
 * pgkill_server() can reap them.
 *
 * Caveat: a subreaper also inherits any other orphaned descendant; the
 * functions here reap only the pids they killed (waitpid on each), never
 * waitpid(-1), so the caller's own children (writer processes) keep their
 * exit status for the caller.
 *
 * Use:
 *     char data[600];
 *     pgkill_datadir(data, sizeof data);     // $OST_TEST_PG_DIR/data
 *     if (pgkill_adopt()) fail;              // once, before any kill
 *     ...
 *     int n = pgkill_server(data);           // SIGKILL postmaster + backends, reaped
 *     if (n < 0 || pgkill_start()) fail;     // start it again (crash recovery runs)
 *     ...
 *     pgkill_terminate_backends(admin, "ostore"); // pg_terminate_backend round
 */
#ifndef OSTORE_TESTS_PGKILL_H
#define OSTORE_TESTS_PGKILL_H

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Sleeps ms milliseconds. */
static void pgkill_sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) && errno == EINTR) {
    }
}

/* Writes $OST_TEST_PG_DIR/data into out. 0, or -1 when OST_TEST_PG_DIR is
 * not set (not run through tests/pg/pgserver.sh) or out is too small. */
static int pgkill_datadir(char *out, size_t cap) {
    const char *dir = getenv("OST_TEST_PG_DIR");
    if (!dir) return -1;
    int n = snprintf(out, cap, "%s/data", dir);
    return n < 0 || (size_t)n >= cap ? -1 : 0;
}

/* The postmaster's pid, from the first line of data/postmaster.pid; 0
 * when there is none (no server running, or the file is being written). */
static pid_t pgkill_postmaster_pid(const char *data) {
    char path[700];
    snprintf(path, sizeof path, "%s/postmaster.pid", data);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    long pid = 0;
    if (fscanf(f, "%ld", &pid) != 1) pid = 0;
    fclose(f);
    return (pid_t)pid;
}

/* The parent pid and state letter of process pid, from /proc/PID/stat
 * (the command name, field 2, may hold spaces and parentheses: the fields
 * after it start after its last ')'). 0, or -1 when pid is gone. */
static int pgkill_stat(pid_t pid, pid_t *ppid, char *state) {
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *p = strrchr(buf, ')');
    long pp;
    char st;
    if (!p || sscanf(p + 1, " %c %ld", &st, &pp) != 2) return -1;
    if (ppid) *ppid = (pid_t)pp;
    if (state) *state = st;
    return 0;
}

/* Fills out[0, cap) with the pids of parent's children (from /proc);
 * returns how many there are (possibly more than cap). */
static size_t pgkill_children(pid_t parent, pid_t *out, size_t cap) {
    DIR *d = opendir("/proc");
    size_t n = 0;
    if (!d) return 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        char *end;
        long pid = strtol(de->d_name, &end, 10);
        pid_t pp;
        if (*end || pid <= 0 || pgkill_stat((pid_t)pid, &pp, NULL)) continue;
        if (pp != parent) continue;
        if (n < cap) out[n] = (pid_t)pid;
        n++;
    }
    closedir(d);
    return n;
}

/* Reaps pid if it is our child (it may be one only once its parent died
 * and it was reparented to us); otherwise waits, at most timeout_ms, until
 * it is gone from /proc. 0 once it is gone or reaped, -1 if it is still
 * there (a zombie some other process must reap). */
static int pgkill_reap(pid_t pid, long timeout_ms) {
    for (long t = 0;; t += 5) {
        pid_t r = waitpid(pid, NULL, WNOHANG);
        if (r == pid) return 0;
        if (r < 0 && errno != ECHILD && errno != EINTR) return -1;
        if (r < 0 && errno == ECHILD && pgkill_stat(pid, NULL, NULL)) return 0; /* gone */
        if (t >= timeout_ms) return -1;
        pgkill_sleep_ms(5);
    }
}

/* Kills the server of data directory data as a crash would: the
 * postmaster is stopped first (SIGSTOP, so that it forks no backend while
 * its children are listed), then the postmaster and each of its children
 * (backends, checkpointer, WAL writer, ...) get SIGKILL, and each is
 * reaped (see the top comment: the caller must have called pgkill_adopt).
 * Nothing of the server runs afterwards and no shared memory is attached,
 * so pgkill_start() starts it again with crash recovery. Returns the
 * number of processes killed, or -1 (no postmaster.pid, or a process that
 * could not be reaped: the message is printed on stderr). */
static int pgkill_server(const char *data) {
    pid_t pm = pgkill_postmaster_pid(data);
    if (pm <= 0) {
        fprintf(stderr, "pgkill: no postmaster.pid in %s\n", data);
        return -1;
    }
    if (kill(pm, SIGSTOP)) {
        fprintf(stderr, "pgkill: postmaster %ld: %s\n", (long)pm, strerror(errno));
        return -1;
    }
    char st = 0;
    for (int i = 0; i < 400 && !pgkill_stat(pm, NULL, &st) && st != 'T'; i++) pgkill_sleep_ms(1);
    pid_t kids[512];
    size_t nk = pgkill_children(pm, kids, 512);
    if (nk > 512) nk = 512; /* max_connections is 60 in pgserver.sh */
    kill(pm, SIGKILL);
    for (size_t i = 0; i < nk; i++) kill(kids[i], SIGKILL);
    int bad = pgkill_reap(pm, 5000);
    /* the children are ours now (reparented when the postmaster died) */
    for (size_t i = 0; i < nk; i++) bad |= pgkill_reap(kids[i], 5000);
    if (bad) {
        fprintf(stderr,
                "pgkill: a killed server process of %s was not reaped (did the test call "
                "pgkill_adopt first?)\n",
                data);
        return -1;
    }
    return (int)(nk + 1);
}

/* Starts the server with $OST_TEST_PG_START (pg_ctl -w start: it returns
 * once the server takes connections, after crash recovery). It tries 5
 * times, a second apart (a start may find the old socket or pid file in
 * the way for a moment). 0, or -1. */
static int pgkill_start(void) {
    const char *start = getenv("OST_TEST_PG_START");
    if (!start) return -1;
    for (int i = 0; i < 5; i++) {
        if (system(start) == 0) return 0;
        pgkill_sleep_ms(1000);
    }
    fprintf(stderr, "pgkill: %s failed 5 times\n", start);
    return -1;
}

/* Stops the server with $OST_TEST_PG_STOP (pg_ctl -m fast stop), then
 * reaps its postmaster if it was ours. 0 or -1. */
static int pgkill_stop(const char *data) {
    const char *stop = getenv("OST_TEST_PG_STOP");
    pid_t pm = pgkill_postmaster_pid(data);
    if (!stop || system(stop) != 0) return -1;
    if (pm > 0) (void)pgkill_reap(pm, 2000);
    return 0;
}

/* Makes this process a child subreaper, then stops the server and starts
 * it again, so that its postmaster is our descendant (the top comment says
 * why). Call it once, before starting threads or writer processes that
 * use the server. 0 or -1 (message on stderr). */
static int pgkill_adopt(void) {
    char data[600];
    if (pgkill_datadir(data, sizeof data)) {
        fprintf(stderr, "pgkill: OST_TEST_PG_DIR is not set (run through tests/pg/pgserver.sh)\n");
        return -1;
    }
    if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) {
        fprintf(stderr, "pgkill: PR_SET_CHILD_SUBREAPER: %s\n", strerror(errno));
        return -1;
    }
    if (pgkill_stop(data) || pgkill_start()) {
        fprintf(stderr, "pgkill: restarting the server as our descendant failed\n");
        return -1;
    }
    return 0;
}

/* A pg_terminate_backend round: terminates every other backend connected
 * to database db, through psql ($PG_BIN/psql, else psql on PATH) on the
 * admin address (OST_TEST_PG_ADMIN). Returns how many were terminated, or
 * -1 when psql failed (the server down, say). */
static int pgkill_terminate_backends(const char *admin, const char *db) {
    const char *bin = getenv("PG_BIN");
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "%s%spsql -X -q -A -t '%s' -c \"SELECT count(pg_terminate_backend(pid)) FROM "
             "pg_stat_activity WHERE datname = '%s' AND pid <> pg_backend_pid()\" 2>/dev/null",
             bin ? bin : "", bin ? "/" : "", admin, db);
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    int n = -1;
    if (fscanf(p, "%d", &n) != 1) n = -1;
    if (pclose(p) != 0) n = -1;
    return n;
}

#endif
