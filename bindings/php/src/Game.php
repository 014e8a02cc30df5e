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
     * The rules as native values, each decoded from $rulesJson (objects as arrays, integers
     * beyond PHP's int as strings): `[['key' => 'rtp', 'value' => '96.10'], ...]`.
     *
     * @var list<mixed>
     */
    public readonly array $rules;

    /**
     * The categories as native values (`['egypt', 'classic']`), each decoded from
     * $categoriesJson; null when the service sent `categories: null`.
     *
     * @var list<mixed>|null
     */
    public readonly ?array $categories;

    /**
     * Rules and categories are decoded when the game is built (PHP 8.2 has no lazy readonly
     * property; the cost is paid once per getGames, beside its HTTPS call).
     *
     * @param list<string> $rulesJson each the raw JSON of one rule, as the service sent it (the
     *     spec does not show the element type)
     * @param list<string>|null $categoriesJson each the raw JSON of one category; null when the
     *     service sent `categories: null`
     * @param string $descriptionShort plain text in the requested locale
     * @param string $descriptionLong HTML in the requested locale
     * @param array<string, string> $extra fields the spec does not define, name => raw JSON
     */
    public function __construct(
        public readonly int $gameId,
        public readonly string $name,
        public readonly array $rulesJson,
        public readonly string $gameType,
        public readonly int $minPlayers,
        public readonly int $maxPlayers,
        public readonly bool $supportsTournament,
        public readonly ?array $categoriesJson,
        public readonly string $imageSquare,
        public readonly string $imageBackground,
        public readonly string $imageLogo,
        public readonly string $descriptionShort,
        public readonly string $descriptionLong,
        public readonly array $extra = [],
    ) {
        $this->rules = self::decoded($rulesJson);
        $this->categories = $categoriesJson === null ? null : self::decoded($categoriesJson);
    }

    /**
     * @param list<string> $items raw JSON texts the library validated
     * @return list<mixed>
     */
    private static function decoded(array $items): array
    {
        return array_map(
            static fn (string $json): mixed => json_decode($json, true, 512, JSON_THROW_ON_ERROR | JSON_BIGINT_AS_STRING),
            $items,
        );
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
