<?php

declare(strict_types=1);

// Who frees what, when: destructors, exceptions between handle and reply, and the number of
// calls crossing into the library per callback.

require __DIR__ . '/helper.php';

use SlotPartner\Event;
use SlotPartner\Library;
use SlotPartner\Native;
use SlotPartner\Receiver;
use SlotPartner\ConfigurationException;
use SlotPartner\ValidationException;

final class BookingFailed extends RuntimeException
{
}

/** Business logic that fails after the event was handled and before it is answered. */
function book(Event $event): string
{
    throw new BookingFailed('ledger unavailable for ' . $event->name);
}

T::test('events are freed when they go out of scope', function (): void {
    $receiver = new Receiver(TOKEN, sources: 'any');
    T::eq(0, Event::liveCount(), 'none live at the start');
    $event = $receiver->parse(fixture('refund.json'));
    T::eq(1, Event::liveCount(), 'one live event');
    $event = null;
    T::eq(0, Event::liveCount(), 'freed by the destructor');
    $receiver->parse(fixture('refund.json'));
    T::eq(0, Event::liveCount(), 'an unused result is freed at once');
    $events = [$receiver->parse(fixture('payout.json')), $receiver->parse(fixture('balance.json'))];
    T::eq(2, Event::liveCount(), 'two held in an array');
    $events[0]->free();
    $events[0]->free();
    T::eq(1, Event::liveCount(), 'free() frees once');
    T::eq('jp-major-eu', $events[0]->jackpotIdentifier, 'properties stay readable after free()');
    $e = T::throws(ConfigurationException::class, fn () => $events[0]->reply(true), 'reply after free()');
    T::eq('event', $e?->field, 'the library refuses the NULL event');
    unset($events);
    T::eq(0, Event::liveCount(), 'all freed');
});

T::test('an exception between handle and reply frees the event', function (): void {
    $receiver = new Receiver(TOKEN, sources: 'any');
    $handler = static function () use ($receiver): string {
        $event = $receiver->handle(TOKEN, '127.0.0.1', fixture('payout.json'));
        return book($event);
    };
    try {
        $handler();
        T::fail('book() threw nothing');
    } catch (BookingFailed $e) {
        T::eq('ledger unavailable for jackpotPayout', $e->getMessage(), 'the business exception');
        // The exception's trace holds the event as an argument of book(): freed with it.
        unset($e);
    }
    T::eq(0, Event::liveCount(), 'freed once the exception is gone');
    for ($i = 0; $i < 1000; $i++) {
        try {
            $handler();
        } catch (BookingFailed) {
        }
    }
    T::eq(0, Event::liveCount(), 'none left after 1000 failed bookings');
});

T::test('refusals allocate nothing', function (): void {
    $receiver = new Receiver(TOKEN, sources: 'any');
    for ($i = 0; $i < 100; $i++) {
        try {
            $receiver->parse(fixture('invalid_money_float.json'));
        } catch (ValidationException) {
        }
    }
    T::eq(0, Event::liveCount(), 'no event held');
});

T::test('one FFI call per callback once a reply is kept', function (): void {
    $counter = new CountingFfi(Library::ffi());
    Native::useFfi($counter);
    try {
        $receiver = new Receiver(TOKEN, sources: 'any');
        foreach (['refund', 'payout', 'balance'] as $kind) {
            $body = fixture($kind . '.json');
            foreach (['first' => 4, 'then' => 1] as $when => $crossings) {
                $counter->reset();
                $event = $receiver->handle(TOKEN, '127.0.0.1', $body, null);
                $reply = $event instanceof SlotPartner\BalanceQuery ? $event->replyBalance(100000) : $event->reply(true);
                T::eq(200, $event->replyHttpStatus(), "$kind ($when): the reply status");
                $event = null;
                T::true(str_starts_with($reply, '{'), "$kind ($when): a reply");
                T::eq($crossings, $counter->total(), "$kind ($when): crossings (" . json_encode($counter->calls) . ')');
                T::eq(1, $counter->calls['sp_receiver_handle_record'] ?? 0, "$kind ($when): one handle, into a record");
            }
            // The first reply was built by the library, inside a native event made for it.
            T::eq(0, $counter->calls['sp_event_free'] ?? 0, "$kind: nothing to free once the reply is kept");
        }
        $counter->reset();
        $event = $receiver->handle(TOKEN, '127.0.0.1', fixture('balance.json'));
        T::eq('{"playerBalance":{"errorMessage":"unknown player"}}', $event->reply(false, 'unknown player'), 'a refused balance query');
        T::eq(500, $event->replyHttpStatus(), 'its status, read from the struct');
        $event = null;
        T::eq(['sp_receiver_handle_record' => 1, 'sp_receiver_parse' => 1, 'sp_event_reply' => 1, 'sp_event_free' => 1], $counter->calls, 'a refused balance query: its reply built in a native event made for it');
        $counter->reset();
        try {
            $receiver->handle(null, '127.0.0.1', fixture('refund.json'));
        } catch (SlotPartner\AuthenticationException) {
        }
        T::eq(['sp_receiver_handle_record' => 1, 'sp_status_name' => 1, 'sp_last_error' => 1], $counter->calls, 'a refusal: handle and one last-error read, the status name once');
        $counter->reset();
        try {
            $receiver->handle(null, '127.0.0.1', fixture('refund.json'));
        } catch (SlotPartner\AuthenticationException) {
        }
        T::eq(2, $counter->total(), 'the status name is cached');
        $counter->reset();
        $file = sys_get_temp_dir() . '/slotpartner-lifetime-' . getmypid() . '.db';
        $journaled = new Receiver(TOKEN, sources: 'any', journal: new SlotPartner\Journal('sqlite:' . $file));
        $counter->reset();
        $journaled->handle(TOKEN, '127.0.0.1', fixture('refund.json'));
        T::eq(['sp_receiver_handle' => 1, 'sp_event_free' => 1], $counter->calls, 'with a journal: a native event, to claim');
        $journaled = null;
        array_map('unlink', glob($file . '*') ?: []);
        // A refund's or payout's success reply is built once per Receiver, then reused.
        foreach (['refund' => '{"refund":{"success":true,"errorMessage":""}}', 'payout' => '{"payout":{"success":true,"errorMessage":""}}'] as $kind => $expected) {
            $counter->reset();
            $event = $receiver->handle(TOKEN, '127.0.0.1', fixture($kind . '.json'));
            T::eq($expected, $event->reply(true), $kind . ': the reused success reply');
            T::eq(200, $event->replyHttpStatus(), $kind . ': its status');
            T::eq($expected, $event->reply(true, ''), $kind . ': an empty message is none');
            T::eq('{"' . $kind . '":{"success":false,"errorMessage":"no"}}', $event->reply(false, 'no'), $kind . ': a failure is built');
            $event = null;
            T::eq(['sp_receiver_handle_record' => 1, 'sp_receiver_parse' => 1, 'sp_event_reply' => 1, 'sp_event_free' => 1], $counter->calls, $kind . ': only the failure crossed, in a native event made for it');
            T::throws(SlotPartner\ConfigurationException::class, fn () => $receiver->handle(TOKEN, '127.0.0.1', fixture($kind . '.json'))->reply(true, 'x'), $kind . ': a success with a message is refused still');
        }
        // The reuse follows the Receiver's settings.
        $omitting = new Receiver(TOKEN, sources: 'any', omitEmptyErrorMessage: true);
        T::eq('{"refund":{"success":true}}', $omitting->handle(TOKEN, '127.0.0.1', fixture('refund.json'))->reply(true), 'another Receiver, its own reply');
        T::eq('{"refund":{"success":true,"errorMessage":""}}', $receiver->handle(TOKEN, '127.0.0.1', fixture('refund.json'))->reply(true), 'the first keeps its own');
        $freed = $receiver->handle(TOKEN, '127.0.0.1', fixture('refund.json'));
        $freed->free();
        T::throws(SlotPartner\ConfigurationException::class, fn () => $freed->reply(true), 'a freed event has no reply, reused or not');
        // A balance reply is put together from the library's reply around marker amounts: byte
        // for byte the library's own (the standalone builder), once built per currency.
        $wrapped = new Receiver(TOKEN, sources: 'any', balanceWrapper: 'wallet', balanceCurrency: 'GBP');
        foreach ([[0, null, 0], [1, 'USD', 2], [9007199254740991, 'EUR', 9007199254740991], [150000, null, 7], [42, 'USD', 0]] as [$money, $currency, $coins]) {
            foreach ([$receiver, $wrapped] as $r) {
                $wrapper = $r === $wrapped ? 'wallet' : 'playerBalance';
                $expected = SlotPartner\Reply::balance($money, $currency ?? ($r === $wrapped ? 'GBP' : 'EUR'), $coins, null, $wrapper);
                $counter->reset();
                $event = $r->handle(TOKEN, '127.0.0.1', fixture('balance.json'));
                T::eq($expected, $event->replyBalance($money, $currency, $coins), "balance $money $currency $coins ($wrapper)");
                T::eq(200, $event->replyHttpStatus(), 'its status');
                $event = null;
            }
        }
        T::eq(['sp_receiver_handle_record' => 1], $counter->calls, 'a balance reply once built: one handle, into a record');
        foreach ([[-1, null, 0, 'money'], [9007199254740992, null, 0, 'money'], [0, null, -5, 'coins'], [0, 'eur', 0, 'currency']] as [$money, $currency, $coins, $field]) {
            $e = T::throws(SlotPartner\ConfigurationException::class, fn () => $receiver->handle(TOKEN, '127.0.0.1', fixture('balance.json'))->replyBalance($money, $currency, $coins), "balance refused: $field");
            T::eq($field, $e?->field, 'the field named');
        }
    } finally {
        Native::useFfi(null);
    }
});

T::test('receivers and clients are freed by their destructors', function (): void {
    $counter = new CountingFfi(Library::ffi());
    Native::useFfi($counter);
    try {
        $receiver = new Receiver(TOKEN, sources: 'any');
        T::eq(1, $counter->calls['sp_receiver_config_free'] ?? 0, 'the configuration is freed at once');
        $receiver = null;
        T::eq(1, $counter->calls['sp_receiver_free'] ?? 0, 'the receiver is freed');
        T::throws(ConfigurationException::class, fn () => new Receiver(TOKEN, sources: 'bogus'), 'a refused setting');
        T::eq(2, $counter->calls['sp_receiver_config_free'] ?? 0, 'the configuration is freed when a setting is refused');
        $client = new SlotPartner\Client('https://127.0.0.1:1', TOKEN);
        T::eq(1, $counter->calls['sp_client_config_free'] ?? 0, 'the client configuration is freed');
        $client = null;
        T::eq(1, $counter->calls['sp_client_free'] ?? 0, 'the client is freed');
        $counter->reset();
        SlotPartner\Reply::result('refund', true);
        T::eq(['sp_reply_result_new' => 1, 'sp_buffer_free' => 1], $counter->calls, 'a standalone reply frees its buffer');
        T::throws(Error::class, fn () => clone new Receiver(TOKEN), 'receivers are not cloneable');
    } finally {
        Native::useFfi(null);
    }
});


/** An application's subclass of Event reaching into another event's state, as PHP lets it. */
abstract class ReachingEvent extends Event
{
    public static function reopen(Event $event): void
    {
        $event->open = true;
    }
}

T::test('an event has one owner: no copy, no unserialized event, no subclass reopening it', function (): void {
    $receiver = new Receiver(TOKEN, sources: 'any');
    $event = $receiver->parse(fixture('refund.json'));
    // Code bound to Event's scope gets past the private __clone(): the copy is refused all the
    // same, owning nothing, so that the native event is freed once.
    $copy = static fn (Event $e): Event => clone $e;
    T::throws(\Error::class, fn () => \Closure::bind($copy, null, Event::class)($event), 'a scope-bound clone');
    T::eq(1, Event::liveCount(), 'still one live event');
    $event = null;
    T::eq(0, Event::liveCount(), 'freed once');
    foreach (["\0SlotPartner\\Event\0open", "\0*\0open"] as $name) {
        $crafted = 'O:21:"SlotPartner\\BuyRefund":1:{s:' . strlen($name) . ':"' . $name . '";b:1;}';
        T::throws(\Error::class, fn () => unserialize($crafted), 'a crafted serialized event');
        T::eq(0, Event::liveCount(), 'an unserialized event is never counted, nor its destruction');
    }
    // A subclass writing the open flag of a freed event makes a property of its own (PHP warns),
    // not the binding's: the freed event stays freed.
    $receiver->parse(fixture('refund.json'))->reply(true);   // a kept success reply exists
    $event = $receiver->handle(TOKEN, '127.0.0.1', fixture('refund.json'));
    $event->free();
    @ReachingEvent::reopen($event);
    T::throws(ConfigurationException::class, fn () => $event->reply(true), 'reply after free(), reopened by a subclass');
    $event = null;
    T::eq(0, Event::liveCount(), 'the live count never goes below zero');
});

T::finish();
