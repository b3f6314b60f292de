/* 32 threads race the very first call into the library (the embedded
 * runtime must start exactly once), each with its own function and inputs,
 * good and bad, and each reads its own last error right after its call.
 *
 * Build: cc ... race_host.c -ltsffi -lpthread
 * Run:   race_host [-s] MTP_DIR DFLASH_DIR
 *        -s: the same 32 calls one after another on the main thread (the
 *        single-threaded answers the racing runs must reproduce exactly).
 * Prints one record per thread, in thread order: T  I  OP  STATUS  OUT  ERR,
 * then DONE. Nothing printed depends on timing or scheduling.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>

#include "rel_common.c"

#define THREADS 32
#define OPS 8

static const char *mtp_dir, *dflash_dir;
static pthread_barrier_t barrier;
static int use_barrier = 1;

struct slot {
    int index;
    int32_t status;
    char *out;
    char *err;
};

static const char *op_name(int op) {
    static const char *names[OPS] = {"build_info", "resolve_drafter", "draft_policies",
                                     "refused", "speculation_plan", "install_info",
                                     "invalid", "json"};
    return names[op];
}

/* Inputs vary with the thread's index, so that every failing thread's
 * message is its own: a message that crossed threads would show. */
static void one_call(struct slot *s) {
    char *out = NULL;
    char options[128];
    int i = s->index;
    switch (i % OPS) {
    case 0:
        s->status = api.build_info_json(&out);
        break;
    case 1:
        s->status = api.resolve_drafter(i % 16 == 1 ? dflash_dir : mtp_dir, NULL, &out);
        break;
    case 2:
        snprintf(options, sizeof options, "{\"speculation\": \"%d\"}", i % 15 + 1);
        s->status = api.draft_policies("{\"drafter\": \"dflash\", \"installHasMtpHead\": false, "
                                       "\"installHasDflash\": true, \"note\": null}",
                                       options, &out);
        break;
    case 3:
        snprintf(options, sizeof options,
                 "{\"speculation\": 2, \"tsffi\": {\"engineBlocker\": \"blocked in thread %d\"}}", i);
        s->status = api.resolve_speculation(options, &out);
        break;
    case 4:
        snprintf(options, sizeof options, "{\"mystery%d\": 1}", i);
        s->status = api.speculation_plan(dflash_dir, options, &out);
        break;
    case 5:
        s->status = api.install_info_json(i % 16 == 5 ? mtp_dir : dflash_dir, &out);
        break;
    case 6:
        snprintf(options, sizeof options, "{\"tsffi\": {\"temperature\": -%d}}", i);
        s->status = api.resolve_speculation(options, &out);
        break;
    default:
        snprintf(options, sizeof options, "{\"speculation\": %*s", i, "");
        s->status = api.speculation_plan(mtp_dir, options, &out);
        break;
    }
    s->err = read_last_error(NULL);
    s->out = out;
}

static void *thread_main(void *arg) {
    struct slot *s = (struct slot *)arg;
    if (use_barrier)
        pthread_barrier_wait(&barrier);
    one_call(s);
    return NULL;
}

int main(int argc, char **argv) {
    pthread_t threads[THREADS];
    struct slot slots[THREADS];
    int i, argi = 1, serial = 0;
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argi < argc && strcmp(argv[argi], "-s") == 0) {
        serial = 1;
        argi++;
    }
    if (argc - argi != 2) {
        printf("FATAL\tusage: race_host [-s] MTP_DIR DFLASH_DIR\n");
        return 2;
    }
    mtp_dir = argv[argi];
    dflash_dir = argv[argi + 1];
    load_api(NULL);
    for (i = 0; i < THREADS; i++) {
        memset(&slots[i], 0, sizeof slots[i]);
        slots[i].index = i;
    }
    if (serial) {
        use_barrier = 0;
        for (i = 0; i < THREADS; i++)
            one_call(&slots[i]);
    } else {
        pthread_barrier_init(&barrier, NULL, THREADS);
        for (i = 0; i < THREADS; i++)
            if (pthread_create(&threads[i], NULL, thread_main, &slots[i]) != 0) {
                printf("FATAL\tpthread_create failed\n");
                return 1;
            }
        for (i = 0; i < THREADS; i++)
            pthread_join(threads[i], NULL);
        pthread_barrier_destroy(&barrier);
    }
    for (i = 0; i < THREADS; i++) {
        struct slot *s = &slots[i];
        printf("T\t%d\t%s\t%d\t", i, op_name(i % OPS), (int)s->status);
        if (s->out == NULL)
            printf("-");
        else {
            printf("=");
            print_escaped(stdout, s->out);
        }
        printf("\t");
        print_escaped(stdout, s->err != NULL ? s->err : "OOM");
        printf("\n");
        api.string_free(s->out);
        free(s->err);
    }
    printf("DONE\n");
    return 0;
}
