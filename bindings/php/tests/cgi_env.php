<?php

declare(strict_types=1);

// Runs examples/callback.php under the CLI, where $_SERVER holds the environment as a CGI
// server would set it, and php://input is empty: for the CONTENT_LENGTH cases the built-in
// server refuses itself. Prints the HTTP status the script set to stderr.

register_shutdown_function(static function (): void {
    fwrite(STDERR, 'status: ' . var_export(http_response_code(), true) . "\n");
});

require dirname(__DIR__) . '/examples/callback.php';
