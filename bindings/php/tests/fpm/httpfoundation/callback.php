<?php

declare(strict_types=1);

// The HttpFoundation adapter with Debian's php-symfony-http-foundation.

use SlotPartner\Endpoint;
use SlotPartner\HttpFoundation\Adapter;
use Symfony\Component\HttpFoundation\Request;

require dirname(__DIR__) . '/logic.php';
require '/usr/share/php/Symfony/Component/HttpFoundation/autoload.php';

(new Adapter(Endpoint::fromEnvironment()))->handle(Request::createFromGlobals(), 'logic')->send();
