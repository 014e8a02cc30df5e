/*
 * get_games: lists the service's games through getGames.
 *
 *   get_games LOCALE [GAME_ID]
 *
 * Configuration (environment):
 *   SLOTPARTNER_BASE_URL  the service's base URL (https:// only)
 *   SLOTPARTNER_TOKEN     the partner token (a UUID)
 *   SLOTPARTNER_CA_FILE   optional PEM file of an extra CA to trust (the sandbox writes one)
 *
 * Prints the games as a table. On failure prints the status name and message and exits 1
 * (2 for usage errors).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "slotpartner.h"

static int fail(const char *what, sp_status status) {
    fprintf(stderr, "get_games: %s: %s: %s\n", what, sp_status_name((int32_t)status), sp_last_error_message().ptr);
    return 1;
}

/* Prints at most `width` characters of `s` (UTF-8 aware), padded to `width`. */
static void cell(sp_str s, int width) {
    size_t i = 0;
    int shown = 0;
    while (i < s.len && shown < width) {
        size_t n = 1;
        unsigned char c = (unsigned char)s.ptr[i];
        if (c >= 0xF0) n = 4; else if (c >= 0xE0) n = 3; else if (c >= 0xC0) n = 2;
        fwrite(s.ptr + i, 1, n, stdout);
        i += n;
        shown++;
    }
    printf("%*s", width - shown + 2, "");
}

int main(int argc, char **argv) {
    const char *base_url = getenv("SLOTPARTNER_BASE_URL");
    const char *token = getenv("SLOTPARTNER_TOKEN");
    const char *ca_file = getenv("SLOTPARTNER_CA_FILE");
    int64_t game_id = -1;
    sp_client_config *config = NULL;
    sp_client *client = NULL;
    sp_games *games = NULL;
    sp_status status;
    size_t i;

    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: get_games LOCALE [GAME_ID]   (SLOTPARTNER_BASE_URL, SLOTPARTNER_TOKEN, SLOTPARTNER_CA_FILE)\n");
        return 2;
    }
    if (argc == 3) {
        char *end = NULL;
        errno = 0;
        game_id = strtoll(argv[2], &end, 10);
        if (errno != 0 || *end != '\0' || game_id < 0) {
            fprintf(stderr, "get_games: GAME_ID must be a non-negative integer, got %s\n", argv[2]);
            return 2;
        }
    }
    status = sp_client_config_new(base_url, token, &config);
    if (status != SP_OK) {
        return fail("configuration", status);
    }
    if (ca_file != NULL && *ca_file != '\0' && (status = sp_client_config_add_ca_file(config, ca_file)) != SP_OK) {
        sp_client_config_free(config);
        return fail("configuration", status);
    }
    status = sp_client_new(config, &client);
    sp_client_config_free(config);
    if (status != SP_OK) {
        return fail("client", status);
    }
    status = sp_client_get_games(client, argv[1], game_id, &games);
    if (status != SP_OK) {
        sp_client_free(client);
        return fail("getGames", status);
    }

    printf("%-6s  %-24s  %-11s  %-4s  %s\n", "ID", "NAME", "TYPE", "TOUR", "DESCRIPTION");
    for (i = 0; i < games->len; i++) {
        const sp_game *game = &games->games[i];
        printf("%-6" PRId64 "  ", game->game_id);
        cell(game->name, 24);
        cell(game->game_type, 11);
        printf("%-4s  ", game->supports_tournament ? "yes" : "no");
        cell(game->description_short, 60);
        printf("\n");
    }
    printf("%zu game%s\n", games->len, games->len == 1 ? "" : "s");
    sp_games_free(games);
    sp_client_free(client);
    return 0;
}
