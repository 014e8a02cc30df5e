<?php

declare(strict_types=1);

namespace SlotPartner;

use FFI\CData;

/**
 * One game of getGames (spec 2.1), the 13 fields of the spec plus the ones it does not define.
 * Plain PHP values copied from the library's answer, which is freed before getGames returns.
 */
final class Game
{
    /**
     * @param list<string> $rules each the raw JSON of one rule (element type not shown by the
     *     spec): json_decode() them
     * @param list<string>|null $categories each the raw JSON of one category; null when the
     *     service sent `categories: null`
     * @param string $descriptionShort plain text in the requested locale
     * @param string $descriptionLong HTML in the requested locale
     * @param array<string, string> $extra fields the spec does not define, name => raw JSON
     */
    public function __construct(
        public readonly int $gameId,
        public readonly string $name,
        public readonly array $rules,
        public readonly string $gameType,
        public readonly int $minPlayers,
        public readonly int $maxPlayers,
        public readonly bool $supportsTournament,
        public readonly ?array $categories,
        public readonly string $imageSquare,
        public readonly string $imageBackground,
        public readonly string $imageLogo,
        public readonly string $descriptionShort,
        public readonly string $descriptionLong,
        public readonly array $extra = [],
    ) {
    }

    /**
     * Copies a native `sp_game`; $game is owned by its `sp_games` and is not kept.
     *
     * @internal Called by Client.
     */
    public static function fromNative(CData $game): self
    {
        return new self(
            $game->game_id,
            Native::text($game->name),
            Native::strings($game->rules, $game->rules_len),
            Native::text($game->game_type),
            $game->min_players,
            $game->max_players,
            $game->supports_tournament,
            $game->has_categories ? Native::strings($game->categories, $game->categories_len) : null,
            Native::text($game->image_square),
            Native::text($game->image_background),
            Native::text($game->image_logo),
            Native::text($game->description_short),
            Native::text($game->description_long),
            Native::fields($game->extra_fields, $game->extra_fields_len),
        );
    }
}
