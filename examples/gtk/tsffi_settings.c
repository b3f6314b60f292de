/* tsffi-settings: a GTK 4 settings window over libtsffi.
 *
 * A reference for GUI developers. The window lets a person pick a model (a
 * folder, or a name recorded in the model store), choose "Speculation" and
 * "Drafter" the way the engine app offers them, and previews what the engine
 * would do with those options: the drafter it opens, whether the session
 * drafts and with which block, whether the host's turns then speculate (the
 * engine's app says "{drafter} x{block}, greedy only" after open: a turn
 * speculates only at temperature 0, without rate control), and the note,
 * reason or refusal text exactly as the library words it.
 *
 * The four things a host has to get right, and where to find them here:
 *
 *  1. LOADING. The library is opened with dlopen() at run time (load_library),
 *     not linked. Linking would make the app fail to start when the library or
 *     its runtime is missing; loading it lets the window show the library's
 *     own error message instead.
 *  2. THREADS. Every library call runs on a worker thread (GTask), never on
 *     the main thread: the first call starts an embedded runtime and a call
 *     reads the install's files, and neither belongs on the thread that draws.
 *     ASSERT_WORKER_THREAD() at each call site makes a slip abort at once.
 *     A change makes ONE call, tsffi_speculation_choices, which answers every
 *     item of both drop-downs and the preview together (compute_choices).
 *  3. STALE ANSWERS. Every change bumps a generation counter; a result that
 *     comes back for an older generation is dropped, never shown
 *     (request_preview / on_choices_done).
 *  4. OWNERSHIP. A string the library returns is the library's: it is read,
 *     copied into GLib strings and released with tsffi_string_free() on the
 *     same worker, never with free() or g_free() (compute_choices).
 *
 * And two things a settings window wants: the model store's recorded names
 * offered beside the folder picker (read_store, which asks the library), and the folder the library
 * actually read watched for changes (watch_folder).
 *
 * Build (GTK >= 4.8, json-glib, gio-unix):
 *   cc -std=c11 -Wall -Wextra -Werror tsffi_settings.c -o tsffi-settings \
 *      $(turbospark-ffi config --cflags) \
 *      $(pkg-config --cflags --libs gtk4 json-glib-1.0 gio-unix-2.0) -ldl
 *
 * Run:
 *   tsffi-settings [--library PATH] [--model DIR|NAME] [--options JSON] [--drive]
 *
 * Without --library the library is found through $TSFFI_LIBRARY, then the
 * installed package (`turbospark-ffi config --libdir`, then
 * `python3 -m turbospark_ffi config --libdir`).
 *
 * --options is the host's own open-options object (a JSON object): the
 * window sends it with its two pickers' keys set, as an app sends the object
 * it gives the engine's open, and shows the library's "warnings" about it (a
 * key the open ignores that looks like a typo of one of its keys). Its
 * "tsffi" object carries the turn's inputs: {"tsffi": {"temperature": 0,
 * "lowPowerMode": true}} (absent temperature: the engine binding's 0.2).
 *
 * --drive reads commands from stdin and prints what the window shows as JSON
 * lines on stdout; tests/test_gui.py drives the real widgets with it (see the
 * "Drive mode" section at the end).
 */

/* Written against GTK 4.8 (Debian 12). GtkFileChooserNative is deprecated from
 * 4.10 in favour of GtkFileDialog, which 4.8 does not have: asking for 4.8
 * keeps one code path that builds warning-free on both. */
#define GDK_VERSION_MIN_REQUIRED GDK_VERSION_4_8

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include <gio/gunixinputstream.h>
#include <gtk/gtk.h>
#include <json-glib/json-glib.h>

/* Only for the TSFFI_ constants and to type-check the pointers below: the
 * functions themselves come from dlsym(), so nothing here links the library. */
#include "tsffi.h"

/* ------------------------------------------------------------------------ */
/* The items the engine app offers. The option value each one sends is the
 * same JSON the engine's open receives. */

typedef struct {
    const char *label;
    const char *value; /* the option's string value, or NULL for a block */
    int block;         /* the block to send when value is NULL */
} SpeculationItem;

static const SpeculationItem SPECULATION_ITEMS[] = {
    {"Auto", "auto", 0}, {"Off", "off", 0}, {"Block 2", NULL, 2},
    {"Block 4", NULL, 4}, {"Block 8", NULL, 8},
};
#define N_SPECULATION G_N_ELEMENTS(SPECULATION_ITEMS)

static const char *const DRAFTER_ITEMS[] = {"auto", "mtp", "dflash"};
#define N_DRAFTER G_N_ELEMENTS(DRAFTER_ITEMS)

/* ------------------------------------------------------------------------ */
/* The library, loaded at run time. */

typedef struct {
    uint32_t (*abi_version)(void);
    int32_t (*build_info_json)(char **out_json);
    size_t (*last_error)(char *buf, size_t cap);
    void (*string_free)(char *s);
    int32_t (*speculation_choices)(const char *model_dir, const char *options_json,
                                   char **out_json);
    int32_t (*store_json)(char **out_json);
} Tsffi;

/* Every library call site starts with this. The main thread owns the default
 * main context while the app runs, and no worker does, so a call that slipped
 * onto the main thread aborts here instead of freezing the window now and then. */
#define ASSERT_WORKER_THREAD() g_assert(!g_main_context_is_owner(g_main_context_default()))

/* The path to dlopen(): an explicit one, else the installed package's. The
 * error says where it looked, so a person can fix it. Runs on the worker. */
static char *find_library(const char *explicit_path, char **error) {
    const char *from_env = g_getenv("TSFFI_LIBRARY");
    /* The two ways an installed package answers "where is the library". */
    const char *const commands[][5] = {
        {"turbospark-ffi", "config", "--libdir", NULL, NULL},
        {"python3", "-m", "turbospark_ffi", "config", "--libdir"},
    };
    GString *tried = g_string_new(NULL);
    size_t i;

    if (explicit_path != NULL)
        return g_strdup(explicit_path);
    if (from_env != NULL && from_env[0] != '\0')
        return g_strdup(from_env);
    for (i = 0; i < G_N_ELEMENTS(commands); i++) {
        char *argv[6] = {0};
        char *out = NULL, *err = NULL;
        int wait_status = 0;
        GError *spawn_error = NULL;
        memcpy(argv, commands[i], sizeof commands[i]);
        if (g_spawn_sync(NULL, argv, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL, &out, &err,
                         &wait_status, &spawn_error) &&
            g_spawn_check_wait_status(wait_status, NULL)) {
            char *path = g_build_filename(g_strstrip(out), "libtsffi.so", NULL);
            g_free(out);
            g_free(err);
            g_string_free(tried, TRUE);
            return path;
        }
        g_string_append_printf(tried, "\n  %s %s: %s", argv[0], argv[1],
                               spawn_error ? spawn_error->message
                                           : (err && err[0] ? g_strstrip(err) : "failed"));
        g_clear_error(&spawn_error);
        g_free(out);
        g_free(err);
    }
    *error = g_strdup_printf("libtsffi was not found: pass --library PATH, set "
                             "TSFFI_LIBRARY, or install the turbospark_ffi package. Tried:%s",
                             tried->str);
    g_string_free(tried, TRUE);
    return NULL;
}

/* The calling thread's last error, as a GLib string. The last error is per
 * thread, so this must run on the thread that made the failing call. */
static char *last_error_text(const Tsffi *lib) {
    size_t len = lib->last_error(NULL, 0);
    char *text = g_malloc(len + 1);
    lib->last_error(text, len + 1);
    return text;
}

/* What the load task hands back to the main thread. */
typedef struct {
    const Tsffi *lib; /* NULL when the library cannot be used */
    char *path;       /* what was loaded (or tried) */
    char *error;      /* why it cannot be used: the loader's or the library's words */
    char *summary;    /* the build information, one line */
} Loaded;

static void loaded_free(Loaded *loaded) {
    g_free(loaded->path);
    g_free(loaded->error);
    g_free(loaded->summary);
    g_free(loaded);
}

/* Resolve one symbol into a function pointer. The sizeof() line is a
 * compile-time check that the pointer's type matches the header's prototype;
 * sizeof does not evaluate its operand, so it references no symbol. Going
 * through void ** is the POSIX way to store dlsym()'s result in a function
 * pointer without a cast ISO C forbids. */
#define RESOLVE(lib, field, symbol)                                               \
    do {                                                                          \
        (void)sizeof((lib)->field = symbol);                                      \
        *(void **)&(lib)->field = dlsym(handle, #symbol);                         \
        if ((lib)->field == NULL) {                                               \
            loaded->error = g_strdup_printf("%s: %s is missing", loaded->path, #symbol); \
            g_free(lib);                                                          \
            return loaded;                                                        \
        }                                                                         \
    } while (0)

/* Runs on the worker: find, dlopen and check the library, then make the first
 * call, which starts its embedded runtime. A library that loads but whose
 * runtime cannot start (its Python package is missing, say) answers that call
 * with TSFFI_ERR_RUNTIME and a message; that message is what the window shows. */
static Loaded *load_library(const char *explicit_path) {
    Loaded *loaded = g_new0(Loaded, 1);
    Tsffi *lib;
    void *handle;
    char *info = NULL;
    int32_t status;

    ASSERT_WORKER_THREAD();

    loaded->path = find_library(explicit_path, &loaded->error);
    if (loaded->path == NULL)
        return loaded;
    /* Never dlclose()d: the library stays resident for the process anyway
     * (its header says so), and lib points into it. */
    handle = dlopen(loaded->path, RTLD_NOW | RTLD_LOCAL);
    if (handle == NULL) {
        loaded->error = g_strdup(dlerror());
        return loaded;
    }
    lib = g_new0(Tsffi, 1);
    RESOLVE(lib, abi_version, tsffi_abi_version);
    RESOLVE(lib, build_info_json, tsffi_build_info_json);
    RESOLVE(lib, last_error, tsffi_last_error);
    RESOLVE(lib, string_free, tsffi_string_free);
    RESOLVE(lib, speculation_choices, tsffi_speculation_choices);
    RESOLVE(lib, store_json, tsffi_store_json);
    if (lib->abi_version() != TSFFI_ABI_VERSION) {
        loaded->error = g_strdup_printf("%s speaks ABI %u; this app was built for ABI %u",
                                        loaded->path, lib->abi_version(), TSFFI_ABI_VERSION);
        g_free(lib);
        return loaded;
    }
    status = lib->build_info_json(&info);
    if (status != TSFFI_OK) {
        loaded->error = last_error_text(lib);
        g_free(lib);
        return loaded;
    }
    {
        JsonParser *parser = json_parser_new();
        if (json_parser_load_from_data(parser, info, -1, NULL)) {
            JsonObject *o = json_node_get_object(json_parser_get_root(parser));
            loaded->summary = g_strdup_printf(
                "libtsffi %s (ABI %u, Python %s)",
                json_object_get_string_member_with_default(o, "version", "?"),
                lib->abi_version(), json_object_get_string_member_with_default(o, "python", "?"));
        }
        g_object_unref(parser);
    }
    lib->string_free(info);
    loaded->lib = lib;
    return loaded;
}

/* ------------------------------------------------------------------------ */
/* One item's answer, as the preview shows it. Computed on the worker, then
 * owned by the main thread. Every string is a GLib copy; none points into the
 * library. */

typedef struct {
    int32_t status;   /* TSFFI_OK, TSFFI_ERR_REFUSED, ... */
    char *error;      /* the library's message when status is not TSFFI_OK */
    char *drafter;    /* "mtp" or "dflash": the drafter the engine opens */
    gint64 block;     /* the block speculation runs with; 0 when it does not run */
    char *policies;   /* the draft policies in a few words */
    char *note;       /* the drafter choice's note, or NULL */
    char *reason;     /* why speculation is off, or NULL */
    char *session_drafter;     /* the drafter the session drafts with, or NULL */
    gboolean turn_speculates;  /* a turn the host sends speculates */
    char *turn_reason;         /* why it will not though the session drafts, or NULL */
} Outcome;

static void outcome_clear(Outcome *o) {
    g_free(o->error);
    g_free(o->drafter);
    g_free(o->policies);
    g_free(o->note);
    g_free(o->reason);
    g_free(o->session_drafter);
    g_free(o->turn_reason);
    memset(o, 0, sizeof *o);
}

/* A string member, or NULL when it is absent or JSON null. */
static const char *string_or_null(JsonObject *o, const char *name) {
    JsonNode *node = json_object_get_member(o, name);
    return node != NULL && JSON_NODE_HOLDS_VALUE(node) ? json_node_get_string(node) : NULL;
}

static gint64 int_or_zero(JsonObject *o, const char *name) {
    JsonNode *node = json_object_get_member(o, name);
    return node != NULL && JSON_NODE_HOLDS_VALUE(node) ? json_node_get_int(node) : 0;
}

static char *policy_text(JsonObject *policies, const char *name) {
    JsonObject *p = json_object_get_object_member(policies, name);
    const char *mode = string_or_null(p, "mode");
    gint64 block = int_or_zero(p, "block");
    return block ? g_strdup_printf("%s %s %" G_GINT64_FORMAT, name, mode, block)
                 : g_strdup_printf("%s %s", name, mode);
}

/* Read one plan object: the same shape tsffi_speculation_plan returns (see
 * the header), which is what every choice entry carries. */
static void read_plan(JsonObject *plan, Outcome *out) {
    JsonObject *drafter = json_object_get_object_member(plan, "drafter");
    JsonObject *policies = json_object_get_object_member(plan, "draftPolicies");
    JsonObject *speculation = json_object_get_object_member(plan, "speculation");
    JsonObject *turn = json_object_get_object_member(plan, "turn");
    char *mtp = policy_text(policies, "mtp");
    char *dflash = policy_text(policies, "dflash");
    out->drafter = g_strdup(string_or_null(drafter, "drafter"));
    out->note = g_strdup(string_or_null(drafter, "note"));
    out->block = int_or_zero(speculation, "block");
    out->reason = g_strdup(string_or_null(speculation, "reason"));
    out->session_drafter = g_strdup(string_or_null(speculation, "drafter"));
    out->turn_speculates = json_object_get_boolean_member(turn, "speculates");
    out->turn_reason = g_strdup(string_or_null(turn, "reason"));
    out->policies = g_strdup_printf("%s, %s", mtp, dflash);
    g_free(mtp);
    g_free(dflash);
}

/* Read one entry of the choices: its status, and its plan or its refusal. */
static void read_entry(JsonObject *entry, Outcome *out) {
    JsonNode *plan = json_object_get_member(entry, "plan");
    out->status = (int32_t)int_or_zero(entry, "status");
    if (out->status == TSFFI_OK && plan != NULL && JSON_NODE_HOLDS_OBJECT(plan))
        read_plan(json_node_get_object(plan), out);
    else
        out->error = g_strdup(string_or_null(entry, "error"));
}

/* What a finished builder holds, as JSON text (g_free it); the builder is
 * released. */
static char *builder_text(JsonBuilder *b) {
    JsonNode *root = json_builder_get_root(b);
    JsonGenerator *gen = json_generator_new();
    char *text;
    json_generator_set_root(gen, root);
    text = json_generator_to_data(gen, NULL);
    json_node_unref(root);
    g_object_unref(gen);
    g_object_unref(b);
    return text;
}

/* Test mode: one JSON line on stdout per report, flushed (the test reads it
 * as it comes); the builder is released. */
static void drive_print(JsonBuilder *b) {
    char *line = builder_text(b);
    printf("%s\n", line);
    fflush(stdout);
    g_free(line);
}

/* The options object for one pair of items: what the engine's open gets.
 * `base` is the host's own object (--options, checked to be one at start-up)
 * or NULL: its members are kept, but the two the pickers set. */
static char *options_json(JsonObject *base, guint speculation, guint drafter) {
    JsonBuilder *b = json_builder_new();
    json_builder_begin_object(b);
    if (base != NULL) {
        GList *names = json_object_get_members(base), *name;
        for (name = names; name != NULL; name = name->next) {
            if (strcmp(name->data, "speculation") == 0 ||
                strcmp(name->data, "speculativeDrafter") == 0)
                continue;
            json_builder_set_member_name(b, name->data);
            json_builder_add_value(b, json_node_copy(json_object_get_member(base, name->data)));
        }
        g_list_free(names);
    }
    json_builder_set_member_name(b, "speculation");
    if (SPECULATION_ITEMS[speculation].value != NULL)
        json_builder_add_string_value(b, SPECULATION_ITEMS[speculation].value);
    else
        json_builder_add_int_value(b, SPECULATION_ITEMS[speculation].block);
    json_builder_set_member_name(b, "speculativeDrafter");
    json_builder_add_string_value(b, DRAFTER_ITEMS[drafter]);
    json_builder_end_object(b);
    return builder_text(b);
}

/* Which of the window's items an entry is: its index in SPECULATION_ITEMS
 * and in DRAFTER_ITEMS, or -1 for an item the window does not offer (the
 * library answers for blocks 1 to 15; the window offers 2, 4 and 8). */
static int speculation_index(JsonObject *entry) {
    JsonNode *node = json_object_get_member(entry, "speculation");
    size_t i;
    if (node == NULL || !JSON_NODE_HOLDS_VALUE(node))
        return -1;
    for (i = 0; i < N_SPECULATION; i++) {
        const SpeculationItem *item = &SPECULATION_ITEMS[i];
        if (item->value != NULL ? json_node_get_value_type(node) == G_TYPE_STRING &&
                                      strcmp(json_node_get_string(node), item->value) == 0
                                : json_node_get_value_type(node) == G_TYPE_INT64 &&
                                      json_node_get_int(node) == item->block)
            return (int)i;
    }
    return -1;
}

static int drafter_index(JsonObject *entry) {
    const char *drafter = string_or_null(entry, "speculativeDrafter");
    size_t i;
    for (i = 0; drafter != NULL && i < N_DRAFTER; i++)
        if (strcmp(drafter, DRAFTER_ITEMS[i]) == 0)
            return (int)i;
    return -1;
}

/* ------------------------------------------------------------------------ */
/* The work a change asks for: ONE tsffi_speculation_choices call answers
 * every item at once (51 of them), so the marks and the preview come from the
 * same reading of the install. The window picks out the items it offers:
 * each Speculation item with the selected drafter, each Drafter item with the
 * selected speculation, and the selected pair for the preview. */

typedef struct {
    guint generation;  /* the change this answers */
    const Tsffi *lib;  /* immutable once loaded, never freed: safe on any thread */
    char *model;       /* as typed or chosen: a folder or an installed alias */
    guint speculation; /* selected items */
    guint drafter;
    JsonObject *base;  /* --options (a reference), or NULL */
} Request;

typedef struct {
    Outcome speculation[N_SPECULATION]; /* each item, with the selected drafter */
    Outcome drafter[N_DRAFTER];         /* each item, with the selected speculation */
    Outcome preview;                    /* the entry marked "selected" */
    char *model_dir;                    /* the directory the library read; NULL on error */
    char *warnings;                     /* the table's "warnings", one a line; NULL: none */
} Choices;

static void request_free(Request *r) {
    g_clear_pointer(&r->base, json_object_unref);
    g_free(r->model);
    g_free(r);
}

static void choices_free(Choices *c) {
    size_t i;
    for (i = 0; i < N_SPECULATION; i++)
        outcome_clear(&c->speculation[i]);
    for (i = 0; i < N_DRAFTER; i++)
        outcome_clear(&c->drafter[i]);
    outcome_clear(&c->preview);
    g_free(c->model_dir);
    g_free(c->warnings);
    g_free(c);
}

/* The table's "warnings" (hints about the host's options that change
 * nothing: the open ignores the keys they are about), one a line, verbatim;
 * NULL when there are none. */
static char *read_warnings(JsonObject *root) {
    JsonNode *node = json_object_get_member(root, "warnings");
    JsonArray *warnings;
    GString *text;
    guint i, n;
    if (node == NULL || !JSON_NODE_HOLDS_ARRAY(node))
        return NULL;
    warnings = json_node_get_array(node);
    n = json_array_get_length(warnings);
    if (n == 0)
        return NULL;
    text = g_string_new(NULL);
    for (i = 0; i < n; i++)
        g_string_append_printf(text, "%s%s", i ? "\n" : "",
                               json_array_get_string_element(warnings, i));
    return g_string_free(text, FALSE);
}

/* Read tsffi_speculation_choices' JSON (see the header for its shape). */
static void read_choices(const char *json, const Request *r, Choices *c) {
    JsonParser *parser = json_parser_new();
    GError *error = NULL;
    JsonObject *root;
    JsonArray *entries;
    gboolean selected = FALSE;
    guint i, n;

    if (!json_parser_load_from_data(parser, json, -1, &error)) {
        c->preview.status = TSFFI_ERR_INTERNAL;
        c->preview.error = g_strdup_printf("the choices are not JSON: %s", error->message);
        g_error_free(error);
        g_object_unref(parser);
        return;
    }
    root = json_node_get_object(json_parser_get_root(parser));
    c->model_dir = g_strdup(string_or_null(root, "modelDir"));
    c->warnings = read_warnings(root);
    entries = json_object_get_array_member(root, "choices");
    n = json_array_get_length(entries);
    for (i = 0; i < n; i++) {
        JsonObject *entry = json_array_get_object_element(entries, i);
        int s = speculation_index(entry), d = drafter_index(entry);
        if (json_object_get_boolean_member_with_default(entry, "selected", FALSE)) {
            read_entry(entry, &c->preview);
            selected = TRUE;
        }
        if (s >= 0 && d == (int)r->drafter)
            read_entry(entry, &c->speculation[s]);
        if (d >= 0 && s == (int)r->speculation)
            read_entry(entry, &c->drafter[d]);
    }
    if (!selected) { /* the header promises one; say so rather than show nothing */
        c->preview.status = TSFFI_ERR_INTERNAL;
        c->preview.error = g_strdup("the choices mark no item as selected");
    }
    g_object_unref(parser);
}

/* The one library call a change makes. Runs on the worker. */
static Choices *compute_choices(const Request *r) {
    Choices *c = g_new0(Choices, 1);
    char *options = options_json(r->base, r->speculation, r->drafter);
    char *json = NULL;
    int32_t status;
    ASSERT_WORKER_THREAD();
    status = r->lib->speculation_choices(r->model, options, &json);
    if (status == TSFFI_OK) {
        read_choices(json, r, c);
    } else {
        /* The whole call failed (an unreadable name, say): that is about the
         * model, not about any one item, so every item stays available and
         * the preview says what went wrong. */
        c->preview.status = status;
        c->preview.error = last_error_text(r->lib); /* same thread as the call: per thread */
    }
    /* The library's string, released by the library (NULL when the call failed,
     * which tsffi_string_free accepts). Nothing keeps a pointer into it. */
    r->lib->string_free(json);
    g_free(options);
    return c;
}

static void choices_worker(GTask *task, gpointer source, gpointer data,
                           GCancellable *cancellable) {
    (void)source;
    /* Superseded while it waited for a worker: nobody would look. */
    if (g_cancellable_is_cancelled(cancellable))
        g_task_return_new_error(task, G_IO_ERROR, G_IO_ERROR_CANCELLED, "superseded");
    else
        g_task_return_pointer(task, compute_choices(data), (GDestroyNotify)choices_free);
}

/* ------------------------------------------------------------------------ */
/* The model store: the aliases the engine's installer recorded, offered by
 * the model chooser. The library lists them (tsffi_store_json): it reads
 * installed.json exactly as it resolves a name -- as the engine does, all or
 * nothing, a later row of an alias winning -- so the window offers exactly
 * the names a preview would find, with each install's drafters as badges,
 * and never re-implements the store's rules. */

typedef struct {
    char *alias;
    char *path;   /* the directory a plan of the alias reads */
    char *badges; /* the install's drafters, in words */
} StoreRow;

static void store_row_free(StoreRow *row) {
    g_free(row->alias);
    g_free(row->path);
    g_free(row->badges);
    g_free(row);
}

/* What one tsffi_store_json call said. */
typedef struct {
    GPtrArray *rows;  /* StoreRow, in the library's order */
    char *store_file; /* <root>/installed.json, or NULL: no store */
    char *reason;     /* why there are no rows, or NULL */
} StoreListing;

static void store_listing_free(StoreListing *listing) {
    g_ptr_array_unref(listing->rows);
    g_free(listing->store_file);
    g_free(listing->reason);
    g_free(listing);
}

/* A member that is true, false, or absent/null (unknown: -1). */
static int flag_or_unknown(JsonObject *o, const char *name) {
    JsonNode *node = json_object_get_member(o, name);
    if (node == NULL || !JSON_NODE_HOLDS_VALUE(node) ||
        json_node_get_value_type(node) != G_TYPE_BOOLEAN)
        return -1;
    return json_node_get_boolean(node) ? 1 : 0;
}

static char *badges_text(int mtp, int dflash) {
    if (mtp < 0 || dflash < 0)
        return g_strdup("its index cannot be read");
    if (mtp && dflash)
        return g_strdup("carries the MTP head and the DFlash2 drafter");
    if (mtp || dflash)
        return g_strdup(mtp ? "carries the MTP head" : "carries the DFlash2 drafter");
    return g_strdup("carries neither drafter");
}

static void add_store_rows(GPtrArray *rows, JsonArray *aliases) {
    guint i, n = aliases != NULL ? json_array_get_length(aliases) : 0;
    for (i = 0; i < n; i++) {
        JsonObject *o = json_array_get_object_element(aliases, i);
        StoreRow *r;
        if (o == NULL || string_or_null(o, "alias") == NULL)
            continue;
        r = g_new0(StoreRow, 1);
        r->alias = g_strdup(string_or_null(o, "alias"));
        r->path = g_strdup(string_or_null(o, "modelDir"));
        r->badges =
            badges_text(flag_or_unknown(o, "installHasMtpHead"), flag_or_unknown(o, "installHasDflash"));
        g_ptr_array_add(rows, r);
    }
}

/* Runs on a worker: the library reads files. */
static StoreListing *read_store(const Tsffi *lib) {
    StoreListing *listing = g_new0(StoreListing, 1);
    JsonParser *parser = json_parser_new();
    char *out = NULL;
    ASSERT_WORKER_THREAD();
    listing->rows = g_ptr_array_new_with_free_func((GDestroyNotify)store_row_free);
    if (lib->store_json(&out) != TSFFI_OK) {
        listing->reason = last_error_text(lib);
    } else if (json_parser_load_from_data(parser, out, -1, NULL) &&
               JSON_NODE_HOLDS_OBJECT(json_parser_get_root(parser))) {
        JsonObject *o = json_node_get_object(json_parser_get_root(parser));
        JsonNode *aliases = json_object_get_member(o, "aliases");
        listing->store_file = g_strdup(string_or_null(o, "storeFile"));
        listing->reason = g_strdup(string_or_null(o, "reason"));
        add_store_rows(listing->rows,
                       aliases != NULL && JSON_NODE_HOLDS_ARRAY(aliases) ? json_node_get_array(aliases)
                                                                         : NULL);
    }
    lib->string_free(out);
    g_object_unref(parser);
    return listing;
}

static void store_worker(GTask *task, gpointer source, gpointer data, GCancellable *c) {
    (void)source, (void)c;
    g_task_return_pointer(task, read_store(data), (GDestroyNotify)store_listing_free);
}

/* ------------------------------------------------------------------------ */
/* A drop-down item that knows whether choosing it would be refused. The
 * drop-down's rows bind to its two properties, so re-marking an item updates
 * the row in place without touching the selection. */

#define CHOICE_TYPE_ITEM (choice_item_get_type())
G_DECLARE_FINAL_TYPE(ChoiceItem, choice_item, CHOICE, ITEM, GObject)

struct _ChoiceItem {
    GObject parent;
    char *label;
    gboolean available; /* FALSE: the library would refuse this choice */
    char *refusal;      /* the refusal text, verbatim; NULL when available */
};

enum { PROP_AVAILABLE = 1, PROP_REFUSAL, N_PROPS };
static GParamSpec *choice_props[N_PROPS];

G_DEFINE_FINAL_TYPE(ChoiceItem, choice_item, G_TYPE_OBJECT)

static void choice_item_get_property(GObject *obj, guint id, GValue *value, GParamSpec *pspec) {
    ChoiceItem *self = CHOICE_ITEM(obj);
    if (id == PROP_AVAILABLE)
        g_value_set_boolean(value, self->available);
    else if (id == PROP_REFUSAL)
        g_value_set_string(value, self->refusal);
    else
        G_OBJECT_WARN_INVALID_PROPERTY_ID(obj, id, pspec);
}

static void choice_item_finalize(GObject *obj) {
    ChoiceItem *self = CHOICE_ITEM(obj);
    g_free(self->label);
    g_free(self->refusal);
    G_OBJECT_CLASS(choice_item_parent_class)->finalize(obj);
}

static void choice_item_class_init(ChoiceItemClass *klass) {
    GObjectClass *object_class = G_OBJECT_CLASS(klass);
    object_class->get_property = choice_item_get_property;
    object_class->finalize = choice_item_finalize;
    choice_props[PROP_AVAILABLE] = g_param_spec_boolean(
        "available", NULL, NULL, TRUE, G_PARAM_READABLE | G_PARAM_STATIC_STRINGS);
    choice_props[PROP_REFUSAL] = g_param_spec_string(
        "refusal", NULL, NULL, NULL, G_PARAM_READABLE | G_PARAM_STATIC_STRINGS);
    g_object_class_install_properties(object_class, N_PROPS, choice_props);
}

static void choice_item_init(ChoiceItem *self) {
    self->available = TRUE;
}

static ChoiceItem *choice_item_new(const char *label) {
    ChoiceItem *self = g_object_new(CHOICE_TYPE_ITEM, NULL);
    self->label = g_strdup(label);
    return self;
}

/* Mark the item from its choice entry: only a refusal makes it unavailable
 * (an error of another kind is about the whole window, not about this choice). */
static void choice_item_mark(ChoiceItem *self, const Outcome *o) {
    gboolean available = o->status != TSFFI_ERR_REFUSED;
    const char *refusal = available ? NULL : o->error;
    if (self->available != available) {
        self->available = available;
        g_object_notify_by_pspec(G_OBJECT(self), choice_props[PROP_AVAILABLE]);
    }
    if (g_strcmp0(self->refusal, refusal) != 0) {
        g_free(self->refusal);
        self->refusal = g_strdup(refusal);
        g_object_notify_by_pspec(G_OBJECT(self), choice_props[PROP_REFUSAL]);
    }
}

/* The rows: a label, insensitive with the refusal as its tooltip when the
 * item would be refused. The row itself is made neither selectable nor
 * activatable then, so the item cannot be chosen from the list. */
static void row_setup(GtkSignalListItemFactory *f, GtkListItem *row, gpointer data) {
    GtkWidget *label = gtk_label_new(NULL);
    (void)f, (void)data;
    gtk_label_set_xalign(GTK_LABEL(label), 0);
    gtk_list_item_set_child(row, label);
}

static void row_bind(GtkSignalListItemFactory *f, GtkListItem *row, gpointer data) {
    ChoiceItem *item = gtk_list_item_get_item(row);
    GtkWidget *label = gtk_list_item_get_child(row);
    GPtrArray *bindings = g_ptr_array_new_with_free_func((GDestroyNotify)g_binding_unbind);
    (void)f, (void)data;
    gtk_label_set_text(GTK_LABEL(label), item->label);
    g_ptr_array_add(bindings, g_object_bind_property(item, "available", label, "sensitive",
                                                     G_BINDING_SYNC_CREATE));
    g_ptr_array_add(bindings, g_object_bind_property(item, "refusal", label, "tooltip-text",
                                                     G_BINDING_SYNC_CREATE));
    g_ptr_array_add(bindings, g_object_bind_property(item, "available", row, "selectable",
                                                     G_BINDING_SYNC_CREATE));
    g_ptr_array_add(bindings, g_object_bind_property(item, "available", row, "activatable",
                                                     G_BINDING_SYNC_CREATE));
    /* Unbound when the row is recycled for another item (row_unbind). */
    g_object_set_data_full(G_OBJECT(row), "bindings", bindings,
                           (GDestroyNotify)g_ptr_array_unref);
}

static void row_unbind(GtkSignalListItemFactory *f, GtkListItem *row, gpointer data) {
    (void)f, (void)data;
    g_object_set_data(G_OBJECT(row), "bindings", NULL);
}

/* The theme pads only activatable rows, so a refused item would sit cramped
 * among the others: one padding for every row of a drop-down's list. */
static void style_rows(void) {
    GtkCssProvider *css = gtk_css_provider_new();
    gtk_css_provider_load_from_data(css, "dropdown popover listview > row { padding: 8px 12px; }",
                                    -1);
    gtk_style_context_add_provider_for_display(gdk_display_get_default(), GTK_STYLE_PROVIDER(css),
                                               GTK_STYLE_PROVIDER_PRIORITY_APPLICATION);
    g_object_unref(css);
}

static GtkWidget *choice_drop_down(GListStore *items) {
    GtkListItemFactory *factory = gtk_signal_list_item_factory_new();
    GtkWidget *dd;
    g_signal_connect(factory, "setup", G_CALLBACK(row_setup), NULL);
    g_signal_connect(factory, "bind", G_CALLBACK(row_bind), NULL);
    g_signal_connect(factory, "unbind", G_CALLBACK(row_unbind), NULL);
    /* The drop-down takes the store's reference and its own on the factory. */
    dd = gtk_drop_down_new(G_LIST_MODEL(items), NULL);
    gtk_drop_down_set_factory(GTK_DROP_DOWN(dd), factory);
    g_object_unref(factory);
    return dd;
}

/* ------------------------------------------------------------------------ */
/* The window. */

typedef struct {
    GtkApplication *gtk;
    char *library_arg; /* --library, or NULL */
    char *model_arg;   /* --model, or NULL */
    char *options_arg; /* --options, or NULL */
    JsonObject *base;  /* --options as an object, or NULL */
    gboolean drive;    /* --drive */

    GtkWidget *window, *model_entry, *installed_button, *choose_button;
    GtkWidget *speculation_dd, *drafter_dd;
    GtkWidget *drafter_value, *speculation_value, *turn_value, *policies_value;
    GtkWidget *message_kind, *message_value, *library_value;
    GtkWidget *warnings_heading, *warnings_value; /* shown only when there are warnings */
    GListStore *speculation_items, *drafter_items; /* owned by the drop-downs */

    gboolean loading;      /* the load task has not answered yet */
    const Tsffi *lib;      /* set by the load task; NULL until then and if it failed */
    guint generation;      /* bumped by every change that alters the answer */
    guint shown;           /* the generation the preview shows */
    GCancellable *pending; /* the in-flight request's, to cut its work short */
    GFileMonitor *monitor; /* the folder the library last read */
    char *watched;         /* that folder's path, or NULL */

    char *store_file;            /* the store's installed.json the library named, or NULL */
    GFileMonitor *store_monitor; /* that file */
    GCancellable *store_pending; /* the in-flight store read's */
    GPtrArray *installed;        /* the StoreRow offered, as last read */

    GDataInputStream *commands; /* drive mode */
    gboolean settle_wanted;
    gulong paint_handler;
    int frames_waited;
    GtkWidget *rows_dd; /* the drop-down (or menu button) whose list is being reported */
    char *rows_pick;    /* the row to press Enter on then, or NULL */
    int rows_tries;
} App;

static void drive_report(App *app, const char *event);
static void drive_settle_check(App *app);

static void set_preview(App *app, const char *drafter, const char *speculation, const char *turn,
                        const char *policies, const char *kind, const char *message) {
    gtk_label_set_text(GTK_LABEL(app->drafter_value), drafter);
    gtk_label_set_text(GTK_LABEL(app->speculation_value), speculation);
    gtk_label_set_text(GTK_LABEL(app->turn_value), turn);
    gtk_label_set_text(GTK_LABEL(app->policies_value), policies);
    gtk_label_set_text(GTK_LABEL(app->message_kind), kind);
    gtk_label_set_text(GTK_LABEL(app->message_value), message);
}

/* What the host's turns do on the session, in the engine app's words for a
 * session that drafts ("{drafter} x{block}, greedy only"), then whether this
 * host's turns speculate; the library's reason why not, verbatim (the engine
 * itself falls back to sequential decoding without a word). */
static char *turn_text(const Outcome *o) {
    if (!o->block)
        return g_strdup("none: the session does not draft");
    if (o->turn_speculates)
        return g_strdup_printf("%s x%" G_GINT64_FORMAT ", greedy only: this host's turns speculate",
                               o->session_drafter, o->block);
    return g_strdup_printf("%s x%" G_GINT64_FORMAT ", greedy only: this host's turns do not "
                           "speculate\n%s",
                           o->session_drafter, o->block, o->turn_reason ? o->turn_reason : "");
}

/* The preview of one plan: every text the library gave is shown verbatim. */
static void show_outcome(App *app, const Outcome *o) {
    if (o->status == TSFFI_OK) {
        char *speculation = o->block
                                ? g_strdup_printf("yes, block %" G_GINT64_FORMAT, o->block)
                                : g_strdup("no");
        char *turn = turn_text(o);
        const char *kind = o->note ? "Note" : o->reason ? "Reason" : "";
        char *message;
        if (o->note && o->reason && strcmp(o->note, o->reason) != 0)
            message = g_strdup_printf("%s\n\n%s", o->note, o->reason);
        else
            message = g_strdup(o->note ? o->note : o->reason ? o->reason : "");
        set_preview(app, o->drafter, speculation, turn, o->policies, kind, message);
        g_free(speculation);
        g_free(turn);
        g_free(message);
    } else if (o->status == TSFFI_ERR_REFUSED) {
        set_preview(app, "none: the engine would refuse to open", "refused", "-", "-", "Refused",
                    o->error);
    } else {
        char *kind = g_strdup_printf("Error %d", (int)o->status);
        set_preview(app, "-", "-", "-", "-", kind, o->error);
        g_free(kind);
    }
}

/* The library's hints about the host's options, verbatim; the row is
 * hidden when there are none. */
static void show_warnings(App *app, const char *warnings) {
    gtk_label_set_text(GTK_LABEL(app->warnings_value), warnings != NULL ? warnings : "");
    gtk_widget_set_visible(app->warnings_heading, warnings != NULL);
    gtk_widget_set_visible(app->warnings_value, warnings != NULL);
}

static void mark_items(GListStore *store, const Outcome *outcomes) {
    guint i, n = g_list_model_get_n_items(G_LIST_MODEL(store));
    for (i = 0; i < n; i++) {
        ChoiceItem *item = g_list_model_get_item(G_LIST_MODEL(store), i); /* a reference */
        choice_item_mark(item, &outcomes[i]);
        g_object_unref(item);
    }
}

static void request_preview(App *app);

/* The folder changed on disk: a drafter finished streaming in, say.
 * Everything but in-progress writes counts: CHANGES_DONE_HINT arrives when a
 * file is closed (or has stopped changing), so the index is read whole, and
 * the engine's writer finishes an install with its manifest, so the last
 * event of an install comes after every file is in place. */
static void on_folder_changed(GFileMonitor *monitor, GFile *file, GFile *other,
                              GFileMonitorEvent event, gpointer data) {
    (void)monitor, (void)file, (void)other;
    if (event == G_FILE_MONITOR_EVENT_CHANGED ||
        event == G_FILE_MONITOR_EVENT_ATTRIBUTE_CHANGED)
        return;
    request_preview(data);
}

/* Watch the folder the library said it read ("modelDir"), not the text in
 * the entry: for an alias that is the install it names, and for a relative
 * path the folder it meant. NULL stops watching. Returns TRUE when a folder
 * that was not watched before is watched now. */
static gboolean watch_folder(App *app, const char *dir) {
    GFile *folder;
    if (g_strcmp0(app->watched, dir) == 0)
        return FALSE;
    if (app->monitor != NULL) {
        g_file_monitor_cancel(app->monitor);
        g_clear_object(&app->monitor);
    }
    g_free(app->watched);
    app->watched = g_strdup(dir);
    if (dir == NULL)
        return FALSE;
    /* A folder that does not exist (yet) is watched too: it appearing is a
     * change worth an answer. */
    folder = g_file_new_for_path(dir);
    app->monitor = g_file_monitor_directory(folder, G_FILE_MONITOR_WATCH_MOVES, NULL, NULL);
    g_object_unref(folder);
    if (app->monitor != NULL)
        g_signal_connect(app->monitor, "changed", G_CALLBACK(on_folder_changed), app);
    return TRUE;
}

/* Main thread: a request's answer is back. */
static void on_choices_done(GObject *source, GAsyncResult *result, gpointer data) {
    App *app = data;
    GTask *task = G_TASK(result);
    Request *request = g_task_get_task_data(task);
    Choices *choices = g_task_propagate_pointer(task, NULL); /* NULL if cancelled */
    gboolean moved;
    (void)source;

    /* THE GENERATION CHECK. Requests finish in any order; only the answer to
     * the latest change may reach the screen. The counter is what decides;
     * the cancellable only spares a worker a call nobody will look at. */
    if (request->generation != app->generation || choices == NULL) {
        if (choices != NULL)
            choices_free(choices);
        return;
    }
    g_clear_object(&app->pending);
    mark_items(app->speculation_items, choices->speculation);
    mark_items(app->drafter_items, choices->drafter);
    show_outcome(app, &choices->preview);
    show_warnings(app, choices->warnings);
    moved = watch_folder(app, choices->model_dir);
    choices_free(choices);
    app->shown = request->generation;
    drive_report(app, "shown");
    /* Only the library knows which folder a name means, so the folder is
     * watched from its answer on; a drafter written into it between the
     * library's reading and now would go unnoticed. A newly watched folder
     * is therefore asked about once more (a warm call: a few stat()s). */
    if (moved)
        request_preview(app);
    drive_settle_check(app);
}

/* Every change lands here: bump the generation, drop the previous request
 * if it has not started and ask again, on a worker. */
static void request_preview(App *app) {
    Request *request;
    GTask *task;
    const char *model = gtk_editable_get_text(GTK_EDITABLE(app->model_entry));

    app->generation++;
    if (app->pending != NULL) {
        g_cancellable_cancel(app->pending);
        g_clear_object(&app->pending);
    }
    if (app->lib == NULL) /* still loading (it asks once loaded), or it failed */
        return;
    if (model[0] == '\0') {
        watch_folder(app, NULL);
        set_preview(app, "-", "-", "-", "-", "", "Choose a model folder or an installed model.");
        app->shown = app->generation;
        drive_report(app, "shown");
        drive_settle_check(app);
        return;
    }
    request = g_new0(Request, 1);
    request->generation = app->generation;
    request->lib = app->lib;
    request->model = g_strdup(model);
    request->speculation = gtk_drop_down_get_selected(GTK_DROP_DOWN(app->speculation_dd));
    request->drafter = gtk_drop_down_get_selected(GTK_DROP_DOWN(app->drafter_dd));
    request->base = app->base != NULL ? json_object_ref(app->base) : NULL;
    app->pending = g_cancellable_new();
    task = g_task_new(NULL, app->pending, on_choices_done, app);
    g_task_set_task_data(task, request, (GDestroyNotify)request_free);
    g_task_run_in_thread(task, choices_worker);
    g_object_unref(task);
}

static void on_model_changed(GtkEditable *entry, gpointer data) {
    (void)entry;
    request_preview(data);
}

static void on_selection_changed(GObject *dd, GParamSpec *pspec, gpointer data) {
    (void)dd, (void)pspec;
    request_preview(data);
}

static void on_folder_chosen(GtkNativeDialog *dialog, int response, gpointer data) {
    App *app = data;
    if (response == GTK_RESPONSE_ACCEPT) {
        GFile *folder = gtk_file_chooser_get_file(GTK_FILE_CHOOSER(dialog));
        char *path = g_file_get_path(folder);
        if (path != NULL)
            gtk_editable_set_text(GTK_EDITABLE(app->model_entry), path);
        g_free(path);
        g_object_unref(folder);
    }
    g_object_unref(dialog);
}

static void on_choose_clicked(GtkButton *button, gpointer data) {
    App *app = data;
    GtkFileChooserNative *dialog = gtk_file_chooser_native_new(
        "Choose a model folder", GTK_WINDOW(app->window), GTK_FILE_CHOOSER_ACTION_SELECT_FOLDER,
        "_Open", "_Cancel");
    (void)button;
    g_signal_connect(dialog, "response", G_CALLBACK(on_folder_chosen), app);
    gtk_native_dialog_show(GTK_NATIVE_DIALOG(dialog));
}

/* A recorded model chosen from the "Installed" list: its alias goes into the
 * entry as if typed, and the library resolves it. */
static void on_installed_activated(GtkListBox *list, GtkListBoxRow *row, gpointer data) {
    App *app = data;
    GtkWidget *label = gtk_list_box_row_get_child(row);
    (void)list;
    gtk_editable_set_text(GTK_EDITABLE(app->model_entry), gtk_label_get_text(GTK_LABEL(label)));
    gtk_menu_button_popdown(GTK_MENU_BUTTON(app->installed_button));
}

static void on_store_changed(GFileMonitor *monitor, GFile *file, GFile *other,
                             GFileMonitorEvent event, gpointer data);

/* Watch the file the library says the store is (the installer writes a new
 * file and renames it into place, which a file monitor reports as the file
 * being created); a store root that moved (TURBOSPARK_HOME changed) moves
 * the watch with it. */
static void watch_store_file(App *app, const char *store_file) {
    GFile *file;
    if (g_strcmp0(store_file, app->store_file) == 0)
        return;
    if (app->store_monitor != NULL) {
        g_file_monitor_cancel(app->store_monitor);
        g_clear_object(&app->store_monitor);
    }
    g_free(app->store_file);
    app->store_file = g_strdup(store_file);
    if (store_file == NULL)
        return;
    file = g_file_new_for_path(store_file);
    app->store_monitor = g_file_monitor_file(file, G_FILE_MONITOR_NONE, NULL, NULL);
    g_object_unref(file);
    if (app->store_monitor != NULL)
        g_signal_connect(app->store_monitor, "changed", G_CALLBACK(on_store_changed), app);
}

static void set_store_tooltip(App *app, const StoreListing *listing) {
    char *tooltip = listing->rows->len > 0
                        ? g_strdup_printf("The models recorded in %s", listing->store_file)
                    : listing->reason != NULL ? g_strdup(listing->reason)
                                              : g_strdup_printf("No model is recorded in %s",
                                                                listing->store_file);
    gtk_widget_set_tooltip_text(app->installed_button, tooltip);
    g_free(tooltip);
}

/* Main thread: the store has been listed. The list is rebuilt whole: it is a
 * handful of names. */
static void on_store_read(GObject *source, GAsyncResult *result, gpointer data) {
    App *app = data;
    StoreListing *listing = g_task_propagate_pointer(G_TASK(result), NULL); /* NULL if superseded */
    GtkWidget *list, *popover;
    guint i;
    (void)source;
    if (listing == NULL)
        return;
    g_clear_object(&app->store_pending);
    list = gtk_list_box_new();
    gtk_list_box_set_selection_mode(GTK_LIST_BOX(list), GTK_SELECTION_NONE);
    for (i = 0; i < listing->rows->len; i++) {
        const StoreRow *row = listing->rows->pdata[i];
        GtkWidget *label = gtk_label_new(row->alias);
        char *tip = g_strdup_printf("%s\n%s", row->path, row->badges);
        gtk_label_set_xalign(GTK_LABEL(label), 0);
        gtk_widget_set_tooltip_text(label, tip);
        g_free(tip);
        gtk_list_box_append(GTK_LIST_BOX(list), label);
    }
    g_signal_connect(list, "row-activated", G_CALLBACK(on_installed_activated), app);
    popover = gtk_popover_new();
    gtk_popover_set_child(GTK_POPOVER(popover), list);
    /* The menu button takes the new popover and drops the old one. */
    gtk_menu_button_set_popover(GTK_MENU_BUTTON(app->installed_button), popover);
    /* Nothing to offer, or a library that cannot be used: nothing to click. */
    gtk_widget_set_sensitive(app->installed_button,
                             listing->rows->len > 0 && gtk_widget_get_sensitive(app->model_entry));
    set_store_tooltip(app, listing);
    watch_store_file(app, listing->store_file);
    if (app->installed != NULL)
        g_ptr_array_unref(app->installed);
    app->installed = g_ptr_array_ref(listing->rows);
    store_listing_free(listing);
    drive_report(app, "store");
}

/* List the store on a worker (a home folder may be slow to read); an older
 * listing still in flight is dropped. Only once the library is loaded: it is
 * the library that reads the store. */
static void read_store_async(App *app) {
    GTask *task;
    if (app->lib == NULL)
        return;
    if (app->store_pending != NULL) {
        g_cancellable_cancel(app->store_pending);
        g_clear_object(&app->store_pending);
    }
    app->store_pending = g_cancellable_new();
    task = g_task_new(NULL, app->store_pending, on_store_read, app);
    g_task_set_task_data(task, (gpointer)app->lib, NULL);
    g_task_run_in_thread(task, store_worker);
    g_object_unref(task);
}

/* installed.json changed: an install was recorded, removed or re-pointed.
 * The list is read again, and the preview asked again, since the alias in
 * the entry may now name another folder. */
static void on_store_changed(GFileMonitor *monitor, GFile *file, GFile *other,
                             GFileMonitorEvent event, gpointer data) {
    (void)monitor, (void)file, (void)other;
    if (event == G_FILE_MONITOR_EVENT_CHANGED ||
        event == G_FILE_MONITOR_EVENT_ATTRIBUTE_CHANGED)
        return;
    read_store_async(data);
    request_preview(data);
}

/* Main thread: the load task is back. */
static void on_loaded(GObject *source, GAsyncResult *result, gpointer data) {
    App *app = data;
    Loaded *loaded = g_task_propagate_pointer(G_TASK(result), NULL);
    (void)source;
    app->loading = FALSE;
    if (loaded->lib == NULL) {
        /* The library's (or the loader's) own words, and a window that stays
         * up to show them. */
        char *where = g_strdup_printf("%s: cannot be used", loaded->path ? loaded->path
                                                                           : "libtsffi");
        gtk_label_set_text(GTK_LABEL(app->library_value), where);
        set_preview(app, "-", "-", "-", "-", "Library error", loaded->error);
        gtk_widget_set_sensitive(app->model_entry, FALSE);
        gtk_widget_set_sensitive(app->installed_button, FALSE);
        gtk_widget_set_sensitive(app->choose_button, FALSE);
        gtk_widget_set_sensitive(app->speculation_dd, FALSE);
        gtk_widget_set_sensitive(app->drafter_dd, FALSE);
        g_free(where);
        app->shown = app->generation;
        drive_report(app, "shown");
        drive_settle_check(app);
    } else {
        char *where = g_strdup_printf("%s\n%s", loaded->summary ? loaded->summary : "",
                                      loaded->path);
        gtk_label_set_text(GTK_LABEL(app->library_value), where);
        g_free(where);
        app->lib = loaded->lib;
        request_preview(app);
        read_store_async(app);
    }
    loaded_free(loaded);
}

static void load_worker(GTask *task, gpointer source, gpointer data, GCancellable *c) {
    (void)source, (void)c;
    g_task_return_pointer(task, load_library(data), (GDestroyNotify)loaded_free);
}

/* A row's name: level with a control's middle, or with a text's first line. */
static GtkWidget *heading_aligned(const char *text, float yalign) {
    GtkWidget *label = gtk_label_new(text);
    gtk_label_set_xalign(GTK_LABEL(label), 1);
    gtk_label_set_yalign(GTK_LABEL(label), yalign);
    gtk_widget_add_css_class(label, "dim-label");
    return label;
}

static GtkWidget *heading(const char *text) {
    return heading_aligned(text, 0);
}

/* A value label: selectable, so a person can copy the library's words. */
static GtkWidget *value_label(void) {
    GtkWidget *label = gtk_label_new(NULL);
    gtk_label_set_xalign(GTK_LABEL(label), 0);
    gtk_label_set_wrap(GTK_LABEL(label), TRUE);
    /* A wrapped label asks for its longest word as its minimum width, and
     * then for a very tall height at that width; a floor keeps the window's
     * shape steady as messages come and go. */
    gtk_label_set_width_chars(GTK_LABEL(label), 50);
    gtk_label_set_max_width_chars(GTK_LABEL(label), 60);
    gtk_label_set_selectable(GTK_LABEL(label), TRUE);
    gtk_widget_set_hexpand(label, TRUE);
    return label;
}

static GListStore *choice_store(const char *const *labels, size_t n) {
    GListStore *store = g_list_store_new(CHOICE_TYPE_ITEM);
    size_t i;
    for (i = 0; i < n; i++) {
        ChoiceItem *item = choice_item_new(labels[i]);
        g_list_store_append(store, item);
        g_object_unref(item);
    }
    return store;
}

static void drive_start(App *app);

static void on_activate(GtkApplication *gtk, gpointer data) {
    App *app = data;
    GtkWidget *grid = gtk_grid_new();
    GtkWidget *model_row = gtk_box_new(GTK_ORIENTATION_HORIZONTAL, 6);
    const char *speculation_labels[N_SPECULATION];
    GTask *task;
    size_t i;

    style_rows();
    app->window = gtk_application_window_new(gtk);
    gtk_window_set_title(GTK_WINDOW(app->window), "Speculation settings");
    gtk_window_set_default_size(GTK_WINDOW(app->window), 640, -1);
    gtk_grid_set_row_spacing(GTK_GRID(grid), 10);
    gtk_grid_set_column_spacing(GTK_GRID(grid), 12);
    gtk_widget_set_margin_start(grid, 18);
    gtk_widget_set_margin_end(grid, 18);
    gtk_widget_set_margin_top(grid, 18);
    gtk_widget_set_margin_bottom(grid, 18);

    app->model_entry = gtk_entry_new();
    gtk_entry_set_placeholder_text(GTK_ENTRY(app->model_entry),
                                   "a model folder or an installed model");
    gtk_widget_set_hexpand(app->model_entry, TRUE);
    /* Filled in once the library has listed the store (read_store_async). */
    app->installed_button = gtk_menu_button_new();
    gtk_menu_button_set_label(GTK_MENU_BUTTON(app->installed_button), "Installed");
    gtk_widget_set_sensitive(app->installed_button, FALSE);
    app->choose_button = gtk_button_new_with_mnemonic("_Choose…");
    gtk_box_append(GTK_BOX(model_row), app->model_entry);
    gtk_box_append(GTK_BOX(model_row), app->installed_button);
    gtk_box_append(GTK_BOX(model_row), app->choose_button);

    for (i = 0; i < N_SPECULATION; i++)
        speculation_labels[i] = SPECULATION_ITEMS[i].label;
    app->speculation_items = choice_store(speculation_labels, N_SPECULATION);
    app->drafter_items = choice_store(DRAFTER_ITEMS, N_DRAFTER);
    app->speculation_dd = choice_drop_down(app->speculation_items);
    app->drafter_dd = choice_drop_down(app->drafter_items);
    gtk_widget_set_halign(app->speculation_dd, GTK_ALIGN_START);
    gtk_widget_set_halign(app->drafter_dd, GTK_ALIGN_START);

    app->drafter_value = value_label();
    app->speculation_value = value_label();
    app->turn_value = value_label();
    app->policies_value = value_label();
    app->message_kind = heading(NULL);
    app->message_value = value_label();
    app->library_value = value_label();
    gtk_widget_add_css_class(app->library_value, "dim-label");
    app->warnings_heading = heading("Warnings");
    app->warnings_value = value_label();

    gtk_grid_attach(GTK_GRID(grid), heading_aligned("Model", 0.5), 0, 0, 1, 1);
    gtk_grid_attach(GTK_GRID(grid), model_row, 1, 0, 1, 1);
    gtk_grid_attach(GTK_GRID(grid), heading_aligned("Speculation", 0.5), 0, 1, 1, 1);
    gtk_grid_attach(GTK_GRID(grid), app->speculation_dd, 1, 1, 1, 1);
    gtk_grid_attach(GTK_GRID(grid), heading_aligned("Drafter", 0.5), 0, 2, 1, 1);
    gtk_grid_attach(GTK_GRID(grid), app->drafter_dd, 1, 2, 1, 1);
    gtk_grid_attach(GTK_GRID(grid), gtk_separator_new(GTK_ORIENTATION_HORIZONTAL), 0, 3, 2, 1);
    gtk_grid_attach(GTK_GRID(grid), heading("Opens drafter"), 0, 4, 1, 1);
    gtk_grid_attach(GTK_GRID(grid), app->drafter_value, 1, 4, 1, 1);
    gtk_grid_attach(GTK_GRID(grid), heading("Session drafts"), 0, 5, 1, 1);
    gtk_grid_attach(GTK_GRID(grid), app->speculation_value, 1, 5, 1, 1);
    gtk_grid_attach(GTK_GRID(grid), heading("Turns"), 0, 6, 1, 1);
    gtk_grid_attach(GTK_GRID(grid), app->turn_value, 1, 6, 1, 1);
    gtk_grid_attach(GTK_GRID(grid), heading("Draft policies"), 0, 7, 1, 1);
    gtk_grid_attach(GTK_GRID(grid), app->policies_value, 1, 7, 1, 1);
    gtk_grid_attach(GTK_GRID(grid), app->message_kind, 0, 8, 1, 1);
    gtk_grid_attach(GTK_GRID(grid), app->message_value, 1, 8, 1, 1);
    gtk_grid_attach(GTK_GRID(grid), app->warnings_heading, 0, 9, 1, 1);
    gtk_grid_attach(GTK_GRID(grid), app->warnings_value, 1, 9, 1, 1);
    gtk_grid_attach(GTK_GRID(grid), gtk_separator_new(GTK_ORIENTATION_HORIZONTAL), 0, 10, 2, 1);
    gtk_grid_attach(GTK_GRID(grid), heading("Library"), 0, 11, 1, 1);
    gtk_grid_attach(GTK_GRID(grid), app->library_value, 1, 11, 1, 1);
    show_warnings(app, NULL);
    gtk_window_set_child(GTK_WINDOW(app->window), grid);

    set_preview(app, "-", "-", "-", "-", "", "Loading libtsffi…");
    gtk_label_set_text(GTK_LABEL(app->library_value), "loading…");
    if (app->model_arg != NULL)
        gtk_editable_set_text(GTK_EDITABLE(app->model_entry), app->model_arg);

    /* Connected after the initial values are set, so that setting them asks
     * nothing: the load task asks once the library is there. */
    g_signal_connect(app->model_entry, "changed", G_CALLBACK(on_model_changed), app);
    g_signal_connect(app->choose_button, "clicked", G_CALLBACK(on_choose_clicked), app);
    g_signal_connect(app->speculation_dd, "notify::selected", G_CALLBACK(on_selection_changed),
                     app);
    g_signal_connect(app->drafter_dd, "notify::selected", G_CALLBACK(on_selection_changed), app);

    gtk_widget_grab_focus(app->speculation_dd);
    gtk_window_present(GTK_WINDOW(app->window));

    /* Even loading is off the main thread: finding the library may run the
     * package's command, and the first call starts the embedded runtime. */
    app->loading = TRUE;
    task = g_task_new(NULL, NULL, on_loaded, app);
    g_task_set_task_data(task, g_strdup(app->library_arg), g_free);
    g_task_run_in_thread(task, load_worker);
    g_object_unref(task);

    if (app->drive)
        drive_start(app);
}

/* ------------------------------------------------------------------------ */
/* Drive mode: the test's hands on the real widgets. Commands, one a line on
 * stdin, act through the same calls a person's clicks end in, so the real
 * signal handlers run:
 *
 *   model TEXT        set the model entry's text
 *   speculation N     select item N of the Speculation drop-down
 *   drafter N         select item N of the Drafter drop-down
 *   settle            once the preview shows the latest change and has been
 *                     painted, print a "settled" line
 *   rows NAME [ITEM]  open the "speculation", "drafter" or "installed" list,
 *                     print a "rows" line of its rows (text, sensitive,
 *                     tooltip), then click the row labelled ITEM if given,
 *                     and close it
 *   quit              close the window
 *
 * Every time the preview changes a "shown" line is printed too, and a "store"
 * line every time the store has been read. Each line is a JSON object holding
 * what the labels and lists actually show. */

static void add_items(JsonBuilder *b, const char *name, GListStore *store) {
    guint i, n = g_list_model_get_n_items(G_LIST_MODEL(store));
    json_builder_set_member_name(b, name);
    json_builder_begin_array(b);
    for (i = 0; i < n; i++) {
        ChoiceItem *item = g_list_model_get_item(G_LIST_MODEL(store), i);
        json_builder_begin_object(b);
        json_builder_set_member_name(b, "label");
        json_builder_add_string_value(b, item->label);
        json_builder_set_member_name(b, "available");
        json_builder_add_boolean_value(b, item->available);
        json_builder_set_member_name(b, "refusal");
        json_builder_add_string_value(b, item->refusal); /* NULL becomes null */
        json_builder_end_object(b);
        g_object_unref(item);
    }
    json_builder_end_array(b);
}

static void add_label(JsonBuilder *b, const char *name, GtkWidget *label) {
    json_builder_set_member_name(b, name);
    json_builder_add_string_value(b, gtk_label_get_text(GTK_LABEL(label)));
}

static void add_selected(JsonBuilder *b, const char *name, GtkWidget *dd) {
    ChoiceItem *item = gtk_drop_down_get_selected_item(GTK_DROP_DOWN(dd));
    json_builder_set_member_name(b, name);
    json_builder_add_string_value(b, item ? item->label : NULL);
}

static void drive_report(App *app, const char *event) {
    JsonBuilder *b;
    guint i;
    if (!app->drive)
        return;
    b = json_builder_new();
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "event");
    json_builder_add_string_value(b, event);
    json_builder_set_member_name(b, "generation");
    json_builder_add_int_value(b, app->generation);
    json_builder_set_member_name(b, "model");
    json_builder_add_string_value(b, gtk_editable_get_text(GTK_EDITABLE(app->model_entry)));
    add_selected(b, "selectedSpeculation", app->speculation_dd);
    add_selected(b, "selectedDrafter", app->drafter_dd);
    add_label(b, "drafter", app->drafter_value);
    add_label(b, "speculation", app->speculation_value);
    add_label(b, "turn", app->turn_value);
    add_label(b, "policies", app->policies_value);
    add_label(b, "messageKind", app->message_kind);
    add_label(b, "message", app->message_value);
    add_label(b, "library", app->library_value);
    add_label(b, "warnings", app->warnings_value);
    json_builder_set_member_name(b, "controlsSensitive");
    json_builder_add_boolean_value(b, gtk_widget_is_sensitive(app->speculation_dd));
    add_items(b, "speculationItems", app->speculation_items);
    add_items(b, "drafterItems", app->drafter_items);
    json_builder_set_member_name(b, "installed");
    json_builder_begin_array(b);
    for (i = 0; app->installed != NULL && i < app->installed->len; i++)
        json_builder_add_string_value(b, ((StoreRow *)app->installed->pdata[i])->alias);
    json_builder_end_array(b);
    json_builder_set_member_name(b, "installedSensitive");
    json_builder_add_boolean_value(b, gtk_widget_get_sensitive(app->installed_button));
    json_builder_set_member_name(b, "watching");
    json_builder_add_string_value(b, app->watched); /* NULL becomes null */
    json_builder_set_member_name(b, "width");
    json_builder_add_int_value(b, gtk_widget_get_width(app->window));
    json_builder_set_member_name(b, "height");
    json_builder_add_int_value(b, gtk_widget_get_height(app->window));
    json_builder_end_object(b);
    drive_print(b);
}

/* The rows of a drop-down's (or the menu button's) open list: what a person
 * sees on clicking it. */
static GtkWidget *popover_of(GtkWidget *dd) {
    GtkWidget *child;
    for (child = gtk_widget_get_first_child(dd); child; child = gtk_widget_get_next_sibling(child))
        if (GTK_IS_POPOVER(child))
            return child;
    return NULL;
}

/* The labels of the popover's list (not its search entry's placeholder, say). */
static void collect_labels(GtkWidget *widget, gboolean in_list, GPtrArray *labels) {
    GtkWidget *child;
    for (child = gtk_widget_get_first_child(widget); child;
         child = gtk_widget_get_next_sibling(child)) {
        if (in_list && GTK_IS_LABEL(child))
            g_ptr_array_add(labels, child);
        else
            collect_labels(child, in_list || GTK_IS_LIST_VIEW(child) || GTK_IS_LIST_BOX(child),
                           labels);
    }
}

/* Polled while a list opens: the rows exist once the popover is mapped and
 * laid out, which takes the window system a few frames. */
static gboolean drive_rows_check(gpointer data) {
    App *app = data;
    GtkWidget *popover = popover_of(app->rows_dd);
    gboolean installed = app->rows_dd == app->installed_button;
    guint want = installed ? (app->installed ? app->installed->len : 0)
                           : g_list_model_get_n_items(gtk_drop_down_get_model(
                                 GTK_DROP_DOWN(app->rows_dd)));
    GPtrArray *labels = g_ptr_array_new();
    JsonBuilder *b;
    guint i;

    if (popover != NULL && gtk_widget_get_mapped(popover))
        collect_labels(popover, FALSE, labels);
    if (labels->len < want && ++app->rows_tries < 250) {
        g_ptr_array_unref(labels);
        return G_SOURCE_CONTINUE;
    }
    b = json_builder_new();
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "event");
    json_builder_add_string_value(b, "rows");
    json_builder_set_member_name(b, "dropDown");
    json_builder_add_string_value(b, installed                          ? "installed"
                                     : app->rows_dd == app->drafter_dd ? "drafter"
                                                                       : "speculation");
    json_builder_set_member_name(b, "rows");
    json_builder_begin_array(b);
    for (i = 0; i < labels->len; i++) {
        GtkWidget *label = labels->pdata[i];
        const char *tooltip = gtk_widget_get_tooltip_text(label);
        json_builder_begin_object(b);
        json_builder_set_member_name(b, "label");
        json_builder_add_string_value(b, gtk_label_get_text(GTK_LABEL(label)));
        json_builder_set_member_name(b, "sensitive");
        json_builder_add_boolean_value(b, gtk_widget_get_sensitive(label));
        json_builder_set_member_name(b, "tooltip");
        json_builder_add_string_value(b, tooltip);
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
    json_builder_end_object(b);
    drive_print(b);
    /* Click a row, as the row's own click handler does it. A drop-down's row:
     * select it (a no-op unless the row is selectable), then activate it (a
     * no-op unless it is activatable), which makes the drop-down take the
     * list's selection. A list box's row: activate it. */
    for (i = 0; app->rows_pick != NULL && i < labels->len; i++) {
        if (strcmp(gtk_label_get_text(GTK_LABEL(labels->pdata[i])), app->rows_pick) == 0) {
            GtkWidget *row = gtk_widget_get_parent(labels->pdata[i]);
            if (GTK_IS_LIST_BOX_ROW(row)) {
                g_signal_emit_by_name(row, "activate");
            } else {
                gtk_widget_activate_action(row, "listitem.select", "(bb)", FALSE, FALSE);
                g_signal_emit_by_name(row, "activate-keybinding");
            }
        }
    }
    g_ptr_array_unref(labels);
    if (popover != NULL && gtk_widget_get_visible(popover))
        gtk_popover_popdown(GTK_POPOVER(popover));
    g_clear_pointer(&app->rows_pick, g_free);
    app->rows_dd = NULL;
    return G_SOURCE_REMOVE;
}

static void on_painted(GdkFrameClock *clock, gpointer data) {
    App *app = data;
    int needed;
    /* A longer message makes the window grow, and the window system answers
     * that a frame or more later: until then the content is squeezed into the
     * old size. Wait for the frame that has the room (for a second or so at
     * most: a window manager may hold the window to a smaller size). */
    gtk_widget_measure(app->window, GTK_ORIENTATION_VERTICAL, gtk_widget_get_width(app->window),
                       &needed, NULL, NULL, NULL);
    if (gtk_widget_get_height(app->window) < needed && ++app->frames_waited < 60) {
        gtk_widget_queue_draw(app->window);
        return;
    }
    g_signal_handler_disconnect(clock, app->paint_handler);
    app->paint_handler = 0;
    app->frames_waited = 0;
    /* The frame is drawn; make sure the X server has it before anyone looks. */
    gdk_display_sync(gtk_widget_get_display(app->window));
    drive_report(app, "settled");
}

/* Answer a pending "settle" once nothing newer is in flight, after one more
 * frame, so that what is reported is also what is on the screen. */
static void drive_settle_check(App *app) {
    GdkFrameClock *clock;
    if (!app->settle_wanted || app->loading || app->shown != app->generation)
        return;
    app->settle_wanted = FALSE;
    clock = gtk_widget_get_frame_clock(app->window);
    app->paint_handler = g_signal_connect(clock, "after-paint", G_CALLBACK(on_painted), app);
    gtk_widget_queue_draw(app->window);
}

static void on_command(GObject *stream, GAsyncResult *result, gpointer data) {
    App *app = data;
    GError *error = NULL;
    char *line = g_data_input_stream_read_line_finish_utf8(G_DATA_INPUT_STREAM(stream), result,
                                                           NULL, &error);
    if (line == NULL) { /* end of input (or an error): the driver has gone */
        g_clear_error(&error);
        g_application_quit(G_APPLICATION(app->gtk));
        return;
    }
    if (g_str_has_prefix(line, "model "))
        gtk_editable_set_text(GTK_EDITABLE(app->model_entry), line + 6);
    else if (g_str_has_prefix(line, "speculation "))
        gtk_drop_down_set_selected(GTK_DROP_DOWN(app->speculation_dd),
                                   (guint)g_ascii_strtoull(line + 12, NULL, 10));
    else if (g_str_has_prefix(line, "drafter "))
        gtk_drop_down_set_selected(GTK_DROP_DOWN(app->drafter_dd),
                                   (guint)g_ascii_strtoull(line + 8, NULL, 10));
    else if (g_str_has_prefix(line, "rows ") && app->rows_dd == NULL) {
        /* Open the list as a click on the drop-down's button does (its
         * "clicked" signal), then report its rows once they are there. */
        char **words = g_strsplit(line + 5, " ", 2);
        GtkWidget *button;
        app->rows_dd = strcmp(words[0], "drafter") == 0     ? app->drafter_dd
                       : strcmp(words[0], "installed") == 0 ? app->installed_button
                                                            : app->speculation_dd;
        app->rows_pick = g_strdup(words[1]); /* NULL when only looking */
        app->rows_tries = 0;
        g_strfreev(words);
        for (button = gtk_widget_get_first_child(app->rows_dd); button;
             button = gtk_widget_get_next_sibling(button))
            if (GTK_IS_BUTTON(button))
                g_signal_emit_by_name(button, "clicked");
        g_timeout_add(20, drive_rows_check, app);
    } else if (strcmp(line, "settle") == 0) {
        app->settle_wanted = TRUE;
        drive_settle_check(app);
    } else if (strcmp(line, "quit") == 0) {
        g_free(line);
        g_application_quit(G_APPLICATION(app->gtk));
        return;
    } else
        g_printerr("unknown command: %s\n", line);
    g_free(line);
    g_data_input_stream_read_line_async(app->commands, G_PRIORITY_DEFAULT, NULL, on_command,
                                        app);
}

static void drive_start(App *app) {
    GInputStream *in = g_unix_input_stream_new(0, FALSE);
    /* No transitions (a focus ring fading in, say): a frame reported as
     * settled looks the same however soon after it is captured. */
    g_object_set(gtk_settings_get_default(), "gtk-enable-animations", FALSE, NULL);
    app->commands = g_data_input_stream_new(in);
    g_object_unref(in);
    g_data_input_stream_read_line_async(app->commands, G_PRIORITY_DEFAULT, NULL, on_command,
                                        app);
}

/* ------------------------------------------------------------------------ */

/* --options as a JSON object (a reference), or NULL after saying why not. */
static JsonObject *options_object(const char *text) {
    JsonParser *parser = json_parser_new();
    GError *error = NULL;
    JsonObject *object = NULL;
    if (!json_parser_load_from_data(parser, text, -1, &error)) {
        g_printerr("--options: %s; accepts a JSON object\n", error->message);
        g_error_free(error);
    } else if (!JSON_NODE_HOLDS_OBJECT(json_parser_get_root(parser))) {
        g_printerr("--options: got %s; accepts a JSON object\n", text);
    } else {
        object = json_object_ref(json_node_get_object(json_parser_get_root(parser)));
        /* Read by every worker at once: sealed, so nothing can change it. */
        json_object_seal(object);
    }
    g_object_unref(parser);
    return object;
}

int main(int argc, char **argv) {
    App app = {0};
    GError *error = NULL;
    GOptionEntry entries[] = {
        {"library", 0, 0, G_OPTION_ARG_FILENAME, &app.library_arg,
         "the libtsffi to load (default: $TSFFI_LIBRARY, else the installed package's)",
         "PATH"},
        {"model", 0, 0, G_OPTION_ARG_FILENAME, &app.model_arg,
         "the model to open: a folder or an installed alias", "DIR|NAME"},
        {"options", 0, 0, G_OPTION_ARG_STRING, &app.options_arg,
         "the host's own open-options object, sent with the pickers' two keys set", "JSON"},
        {"drive", 0, 0, G_OPTION_ARG_NONE, &app.drive,
         "read commands from stdin and print what the window shows (for tests)", NULL},
        {NULL, 0, 0, 0, NULL, NULL, NULL},
    };
    GOptionContext *context = g_option_context_new("- preview the engine's speculation choices");
    int status;

    g_option_context_add_main_entries(context, entries, NULL);
    if (!g_option_context_parse(context, &argc, &argv, &error)) {
        g_printerr("%s\n", error->message);
        g_error_free(error);
        g_option_context_free(context);
        return 2;
    }
    g_option_context_free(context);
    if (app.options_arg != NULL && (app.base = options_object(app.options_arg)) == NULL)
        return 2;

    /* NON_UNIQUE: several windows (and parallel tests) may run at once. */
    app.gtk = gtk_application_new("org.turbospark.FfiSettings", G_APPLICATION_NON_UNIQUE);
    g_signal_connect(app.gtk, "activate", G_CALLBACK(on_activate), &app);
    status = g_application_run(G_APPLICATION(app.gtk), 1, argv);
    /* Requests may still be running on workers; they hold only their own
     * copies, and their answers are never delivered once the loop is gone. */
    g_clear_object(&app.monitor);
    g_clear_object(&app.store_monitor);
    g_clear_object(&app.store_pending);
    g_clear_pointer(&app.installed, g_ptr_array_unref);
    g_free(app.watched);
    g_free(app.store_file);
    g_clear_object(&app.commands);
    g_clear_object(&app.pending);
    g_object_unref(app.gtk);
    g_free(app.library_arg);
    g_free(app.model_arg);
    g_free(app.options_arg);
    g_clear_pointer(&app.base, json_object_unref);
    return status;
}
