<?php

declare(strict_types=1);

// Endpoint::serve(): the superglobals and php://input.

require dirname(__DIR__) . '/logic.php';

SlotPartner\Endpoint::fromEnvironment()->serve('logic');
