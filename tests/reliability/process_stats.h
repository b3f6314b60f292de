/* What a memory driver measures of its own process at a checkpoint, from
 * /proc (Linux only, as these drivers are). Shared by memory_host.c and
 * reconcile_host.c (#included). */
#ifndef TSFFI_TEST_PROCESS_STATS_H
#define TSFFI_TEST_PROCESS_STATS_H

#include <dirent.h>
#include <stdio.h>
#include <unistd.h>

/* Resident set size in bytes (-1: /proc/self/statm unreadable). */
static long resident_bytes(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    long size = 0, resident = 0;
    if (f == NULL)
        return -1;
    if (fscanf(f, "%ld %ld", &size, &resident) != 2)
        resident = -1;
    fclose(f);
    return resident < 0 ? -1 : resident * sysconf(_SC_PAGESIZE);
}

/* Open file descriptors (-1: /proc/self/fd unreadable). */
static int open_fds(void) {
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    int n = 0;
    if (d == NULL)
        return -1;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n - 1; /* the directory stream's own descriptor */
}

#endif
