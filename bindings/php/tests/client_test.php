<?php

declare(strict_types=1);

// The client against `slotpartner-sandbox serve` on loopback.

require __DIR__ . '/helper.php';

use SlotPartner\Client;
use SlotPartner\ConfigurationException;
use SlotPartner\Game;
use SlotPartner\ServiceException;
use SlotPartner\Status;
use SlotPartner\TransportException;
use SlotPartner\TrustRoots;

$sandbox = new Sandbox();
$client = new Client($sandbox->url, TOKEN, caFile: $sandbox->caFile);

T::test('getGames: all games, every field', function () use ($client): void {
    $games = $client->getGames('en-US');
    T::eq([1001, 1002, 1003, 1004, 1005, 1006, 1007], array_map(static fn (Game $g): int => $g->gameId, $games), 'ids');
    $g = $games[0];
    T::eq("Pharaoh's Fortune", $g->name, 'name');
    T::eq(['{"key":"paylines","value":"20"}', '{"key":"reels","value":"5x3"}', '{"key":"rtp","value":"96.10"}'], $g->rulesJson, 'rules as raw JSON');
    T::eq([['key' => 'paylines', 'value' => '20'], ['key' => 'reels', 'value' => '5x3'], ['key' => 'rtp', 'value' => '96.10']], $g->rules, 'rules as native values');
    T::eq('SlotMachine', $g->gameType, 'gameType');
    T::eq(0, $g->minPlayers, 'minPlayers');
    T::eq(0, $g->maxPlayers, 'maxPlayers');
    T::eq(true, $g->supportsTournament, 'supportsTournament');
    T::eq(['"egypt"', '"classic"', '"featured"'], $g->categoriesJson, 'categories as raw JSON');
    T::eq(['egypt', 'classic', 'featured'], $g->categories, 'categories as native values');
    T::eq('https://cdn.sandbox.invalid/games/pharaohs-fortune/square.png', $g->imageSquare, 'imageSquare');
    T::eq('https://cdn.sandbox.invalid/games/pharaohs-fortune/background.jpg', $g->imageBackground, 'imageBackground');
    T::eq('https://cdn.sandbox.invalid/games/pharaohs-fortune/logo.png', $g->imageLogo, 'imageLogo');
    T::eq('Five reels, twenty paylines and the "Eye of Horus" wild that expands on every win.', $g->descriptionShort, 'descriptionShort, escapes decoded');
    T::true(str_starts_with($g->descriptionLong, '<p>Descend into the tomb') && str_contains($g->descriptionLong, '<strong>"Eye of Horus"</strong>'), 'descriptionLong HTML');
    T::eq([], $g->extra, 'no extra fields');
    T::eq([], $games[1]->rules, 'empty rules');
    T::eq(null, $games[2]->categories, 'categories: null');
});

T::test('getGames agrees with the raw answer of call()', function () use ($client): void {
    foreach (['en-US', 'de-DE'] as $locale) {
        $raw = $client->call('getGames', ['localeISO639_ISO3166' => $locale])['games'];
        $games = $client->getGames($locale);
        T::eq(count($raw), count($games), $locale . ': count');
        foreach ($games as $i => $g) {
            $r = $raw[$i];
            $mine = [
                'gameId' => $g->gameId, 'name' => $g->name,
                'rules' => $g->rules,
                'gameType' => $g->gameType, 'minPlayers' => $g->minPlayers, 'maxPlayers' => $g->maxPlayers,
                'supportsTournament' => $g->supportsTournament,
                'categories' => $g->categories,
                'imageSquare' => $g->imageSquare, 'imageBackground' => $g->imageBackground, 'imageLogo' => $g->imageLogo,
                'descriptionShort' => $g->descriptionShort, 'descriptionLong' => $g->descriptionLong,
            ];
            T::eq($r, $mine, $locale . ': game ' . $g->gameId . ' has the 13 fields of the answer');
        }
    }
});

T::test('getGames: one game, two locales', function () use ($client): void {
    $de = $client->getGames('de-DE', 1003);
    T::eq(1, count($de), 'one game');
    T::eq(1003, $de[0]->gameId, 'the game asked for');
    T::true(str_starts_with($de[0]->descriptionShort, 'Finden Sie das vierblättrige Kleeblatt'), 'German description');
    T::true(str_contains($de[0]->descriptionLong, 'Glück'), 'non-ASCII text');
    $en = $client->getGames('en_US', 1003);
    T::eq('Find the four-leaf clover and let the leprechaun double your win.', $en[0]->descriptionShort, 'en_US sent as en-US');
    T::eq($de[0]->rules, $en[0]->rules, 'same rules in both locales');
    T::eq([], $client->getGames('en-US', 99999), 'unknown id: no games');
    T::eq(1, count($client->getGames('fr-FR', 1001)), 'other locales fall back');
    T::eq('game_id', T::throws(ConfigurationException::class, fn () => $client->getGames('en-US', -1), 'negative id')?->field, 'negative id field');
    T::eq(Status::INVALID_ARGUMENT, T::throws(ConfigurationException::class, fn () => $client->getGames('english'), 'bad locale')?->status, 'bad locale refused before any connection');
});

T::test('call: echo and unknown actions', function () use ($client): void {
    $answer = $client->call('echo', ['player' => 'p-1', 'amount' => 1500, 'nested' => ['a' => [1, 2]], 'text' => 'Glück "€"']);
    $expected = ['echo' => ['action' => 'echo', 'player' => 'p-1', 'amount' => 1500, 'nested' => ['a' => [1, 2]], 'text' => 'Glück "€"']];
    T::true($expected == $answer, 'echo answer (key order aside): ' . json_encode($answer, JSON_UNESCAPED_UNICODE));
    T::eq(['echo' => ['action' => 'echo']], $client->call('echo'), 'no parameters');
    $e = T::throws(ServiceException::class, fn () => $client->call('noSuchAction'), 'unknown action');
    T::eq(Status::HTTP_STATUS, $e?->status, 'HTTP status error');
    T::true(str_contains((string) $e?->getMessage(), '400') && str_contains((string) $e?->getMessage(), 'unknownAction'), 'message names the status and the body: ' . $e?->getMessage());
});

T::test('client failures', function () use ($sandbox): void {
    $wrong = new Client($sandbox->url, OTHER_TOKEN, caFile: $sandbox->caFile);
    $e = T::throws(ServiceException::class, fn () => $wrong->getGames('en-US'), 'wrong token');
    T::eq(Status::HTTP_STATUS, $e?->status, 'wrong token status');
    T::eq('SP_ERR_HTTP_STATUS', $e?->statusName, 'wrong token status name');
    T::true(str_contains((string) $e?->getMessage(), 'HTTP 401'), 'HTTP 401 in the message: ' . $e?->getMessage());

    $e = T::throws(TransportException::class, fn () => (new Client($sandbox->url, TOKEN))->getGames('en-US'), 'sandbox CA not trusted');
    T::eq(Status::TLS, $e?->status, 'TLS status');
    $pem = (string) file_get_contents($sandbox->caFile);
    T::eq(7, count((new Client($sandbox->url, TOKEN, caPem: $pem, trustRoots: TrustRoots::ExtraOnly))->getGames('en-US')), 'CA as PEM text, only extra roots');

    $e = T::throws(ConfigurationException::class, fn () => new Client(str_replace('https:', 'http:', $sandbox->url), TOKEN), 'plain http');
    T::eq('base_url', $e?->field, 'plain http field');

    $noRetry = new Client($sandbox->url . '/fault/status/503', TOKEN, caFile: $sandbox->caFile, retries: 0);
    $e = T::throws(ServiceException::class, fn () => $noRetry->getGames('en-US'), 'HTTP 503');
    T::true(str_contains((string) $e?->getMessage(), '503'), '503 in the message');

    $e = T::throws(ServiceException::class, fn () => (new Client($sandbox->url . '/fault/malformed', TOKEN, caFile: $sandbox->caFile))->getGames('en-US'), 'malformed games');
    T::eq(Status::BAD_RESPONSE, $e?->status, 'bad response status');
    T::true(str_contains((string) $e?->field, 'gameId'), 'field names the culprit: ' . $e?->field);

    $e = T::throws(TransportException::class, fn () => (new Client($sandbox->url . '/fault/slow/5000', TOKEN, caFile: $sandbox->caFile, timeoutMs: 300, retries: 0))->getGames('en-US'), 'time-out');
    T::eq(Status::TIMEOUT, $e?->status, 'time-out status');

    $e = T::throws(TransportException::class, fn () => (new Client($sandbox->url . '/fault/big', TOKEN, caFile: $sandbox->caFile, maxResponseBytes: 4096, retries: 0))->getGames('en-US'), 'answer too large');
    T::eq(Status::RESPONSE_TOO_LARGE, $e?->status, 'too large status');

    $closed = 'https://127.0.0.1:' . freePort();
    $e = T::throws(TransportException::class, fn () => (new Client($closed, TOKEN, retries: 0))->getGames('en-US'), 'nothing listening');
    T::eq(Status::CONNECT, $e?->status, 'connect status');

    T::eq('retries', T::throws(ConfigurationException::class, fn () => new Client($sandbox->url, TOKEN, retries: -1), 'negative retries')?->field, 'negative retries');
    T::throws(ConfigurationException::class, fn () => new Client($sandbox->url, TOKEN, retries: 11), 'eleven retries');
    T::throws(ConfigurationException::class, fn () => new Client($sandbox->url, TOKEN, maxResponseBytes: 10), 'tiny answer limit');
    T::throws(ConfigurationException::class, fn () => new Client($sandbox->url, TOKEN, proxy: 'ftp://x'), 'bad proxy');
    T::throws(ConfigurationException::class, fn () => new Client($sandbox->url, TOKEN, caFile: '/nonexistent/ca.pem'), 'missing CA file');
});

unset($client);
T::test('the sandbox exits when its standard input closes', function () use ($sandbox): void {
    T::eq(0, $sandbox->stop(), 'sandbox exit status');
});

T::finish();
