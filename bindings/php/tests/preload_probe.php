<?php

declare(strict_types=1);

// Run by preload_test.php with opcache.preload=preload.php: no autoloader here, so the classes
// exist only if preloading declared them. Prints what it saw as JSON.

$preloaded = class_exists('SlotPartner\Receiver', false) && class_exists('SlotPartner\BuyRefund', false);
$receiver = new SlotPartner\Receiver('6f1c2a3e-8b7d-4c5e-9f10-2a3b4c5d6e7f', sources: 'any');
$event = $receiver->parse((string) file_get_contents($argv[1]));
$status = function_exists('opcache_get_status') ? opcache_get_status(false) : false;
echo json_encode([
    'preloaded' => $preloaded,
    'source' => SlotPartner\Library::source(),
    'reply' => $event->reply(true),
    'ffi.enable' => ini_get('ffi.enable'),
    'preloadedClasses' => is_array($status) ? count($status['preload_statistics']['classes'] ?? []) : 0,
]), "\n";
