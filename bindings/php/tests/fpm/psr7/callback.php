<?php

declare(strict_types=1);

// The PSR-7 adapter with Debian's php-nyholm-psr7: the request built as a PSR-7 framework
// builds it from the globals, the response emitted as it emits one.

use Nyholm\Psr7\Factory\Psr17Factory;
use Nyholm\Psr7\ServerRequest;
use SlotPartner\Endpoint;
use SlotPartner\Psr7\Adapter;

require dirname(__DIR__) . '/logic.php';
require '/usr/share/php/Nyholm/Psr7/autoload.php';

$factory = new Psr17Factory();
$request = new ServerRequest($_SERVER['REQUEST_METHOD'], '/callback.php', getallheaders(), fopen('php://input', 'rb'), '1.1', $_SERVER);
$response = (new Adapter(Endpoint::fromEnvironment(), $factory, $factory))->handle($request, 'logic');
http_response_code($response->getStatusCode());
foreach ($response->getHeaders() as $name => $values) {
    header($name . ': ' . implode(', ', $values));
}
echo $response->getBody();
