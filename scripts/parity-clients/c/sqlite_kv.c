/* The independent client of scripts/sqlite-parity: CONNECTIONS threads, each with its own
 * connection to the database file (WAL, synchronous=FULL, as sql-bench opens it), reading random
 * keys in 1..ROWS through one prepared statement (bind, step, reset: how an application calls
 * SQLite's C API) for SECONDS. Every answer must be a row with a value. Prints the selects per
 * second of all threads together. scripts/sqlite-parity compiles it with the SQLite source
 * sql-bench has compiled in, so the two clients run the same engine.
 *
 *   sqlite_kv DATABASE TABLE CONNECTIONS SECONDS [ROWS]
 */
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef struct {
    const char *path;
    char sql[256];
    double seconds;
    long rows;
    unsigned seed;
    long count;
    int failed;
} worker_t;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void *run(void *arg) {
    worker_t *w = arg;
    sqlite3 *db = NULL;
    sqlite3_stmt *select = NULL;
    if (sqlite3_open_v2(w->path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK
        || sqlite3_exec(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;", NULL, NULL, NULL) != SQLITE_OK
        || sqlite3_prepare_v2(db, w->sql, -1, &select, NULL) != SQLITE_OK) {
        fprintf(stderr, "sqlite_kv: %s: %s\n", w->path, db ? sqlite3_errmsg(db) : "cannot open");
        w->failed = 1;
        sqlite3_close(db);
        return NULL;
    }
    double end = now() + w->seconds;
    long n = 0;
    while (!w->failed) {
        /* The clock is read every 64 selects, as a benchmark loop would. */
        for (int i = 0; i < 64; i++) {
            sqlite3_int64 key = 1 + (sqlite3_int64)(rand_r(&w->seed) % w->rows);
            sqlite3_bind_int64(select, 1, key);
            if (sqlite3_step(select) != SQLITE_ROW || sqlite3_column_bytes(select, 0) <= 0) {
                fprintf(stderr, "sqlite_kv: key %lld: no value (%s)\n", (long long)key, sqlite3_errmsg(db));
                w->failed = 1;
                break;
            }
            sqlite3_reset(select);
            n++;
        }
        if (now() >= end) break;
    }
    w->count = n;
    sqlite3_finalize(select);
    sqlite3_close(db);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: sqlite_kv DATABASE TABLE CONNECTIONS SECONDS [ROWS]\n");
        return 2;
    }
    int connections = atoi(argv[3]);
    double seconds = atof(argv[4]);
    long rows = argc > 5 ? atol(argv[5]) : 1000;
    if (connections < 1 || seconds <= 0 || rows < 1) {
        fprintf(stderr, "sqlite_kv: CONNECTIONS, SECONDS and ROWS must be positive\n");
        return 2;
    }
    worker_t *workers = calloc((size_t)connections, sizeof(worker_t));
    pthread_t *threads = calloc((size_t)connections, sizeof(pthread_t));
    double began = now();
    for (int i = 0; i < connections; i++) {
        workers[i].path = argv[1];
        snprintf(workers[i].sql, sizeof workers[i].sql, "SELECT v FROM %s WHERE k = ?1", argv[2]);
        workers[i].seconds = seconds;
        workers[i].rows = rows;
        workers[i].seed = 0x5eed + (unsigned)i;
        pthread_create(&threads[i], NULL, run, &workers[i]);
    }
    long total = 0;
    int failed = 0;
    for (int i = 0; i < connections; i++) {
        pthread_join(threads[i], NULL);
        total += workers[i].count;
        failed |= workers[i].failed;
    }
    double elapsed = now() - began;
    if (failed) return 1;
    printf("%.1f\n", (double)total / elapsed);
    fprintf(stderr, "sqlite_kv: SQLite %s, %d connections, %ld selects in %.2f s\n", sqlite3_libversion(),
            connections, total, elapsed);
    return 0;
}
