"""Read receipts under load, run by `make bench-receipts`.

  python3 scripts/bench_receipts.py .build/release/groupd [--members 200] [--messages 100] [--seconds 10]
                                                          [--recalls 2000]

A Work group of --members members (the owner sends --messages messages) in which every other
member marks the group read, one message further each time, from 256 calls in flight, while the
sender asks GetMessageReadReceipts of the latest message in a loop and holds a Subscribe stream of
its MESSAGE_READ_RECEIPT events; then the owner sends --recalls more messages and recalls them
all from 256 calls in flight, one MarkGroupRead by a member interleaved with each recall. Figures: MarkGroupRead calls/s, GetMessageReadReceipts p50/p99 under that load, the
receipt events the sender received against the reads (the batching, `read_receipt_interval_ms`
1000), and the recall phase's calls/s with the tombstones history then shows. groupd on core 0 (durability full), the client on core 1.
"""
import asyncio
import shutil
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import arguments, auth_md, client_and_server, run_calls  # noqa: E402
import grpc  # noqa: E402
import support  # noqa: F401,E402  (generates the stubs and puts them on sys.path)
from groupd.v1 import (common_pb2, event_pb2, event_pb2_grpc, group_pb2, group_pb2_grpc, message_pb2,  # noqa: E402
                       message_pb2_grpc)

GROUP, OWNER = "receipts", "owner"


def main():
    args = arguments(members=200, messages=100, seconds=10.0, recalls=2000)
    server = client_and_server(args.binary, "receipts", limits={"max_users_per_batch": 1000})
    readers = [f"m{n:03}" for n in range(args.members - 1)]
    tokens = {user: auth_md(user) for user in readers + [OWNER]}
    try:
        server.start("full")
        with grpc.insecure_channel(server.address) as channel:
            grpc.channel_ready_future(channel).result(timeout=10)
            group_pb2_grpc.GroupServiceStub(channel).CreateGroup(group_pb2.CreateGroupRequest(
                group_id=GROUP, type=common_pb2.GROUP_TYPE_WORK, owner_user_id=OWNER,
                profile=common_pb2.GroupProfile(name="receipts"),
                members=[group_pb2.InitialMember(user_id=user, role=common_pb2.MEMBER_ROLE_MEMBER) for user in readers]),
                metadata=auth_md(), timeout=30)
            messages = message_pb2_grpc.MessageServiceStub(channel)
            sequences = [messages.SendGroupMessage(message_pb2.SendGroupMessageRequest(
                group_id=GROUP, type="text", text=f"message {n}"), metadata=tokens[OWNER], timeout=10).message.sequence
                for n in range(args.messages)]

            events, reports = [], [0]
            stream = event_pb2_grpc.EventServiceStub(channel).Subscribe(event_pb2.SubscribeRequest(
                kinds=[common_pb2.EVENT_KIND_MESSAGE_READ_RECEIPT], exclude_messages=True), metadata=tokens[OWNER])

            def read_stream():
                try:
                    for item in stream:
                        if item.WhichOneof("item") == "event":
                            events.append(item.event)
                            reports[0] += len(item.event.read_receipts.messages)
                except grpc.RpcError:
                    pass

            threading.Thread(target=read_stream, daemon=True).start()

            latencies, stop = [], threading.Event()

            def ask_receipts():
                while not stop.is_set():
                    start = time.perf_counter()
                    messages.GetMessageReadReceipts(message_pb2.GetMessageReadReceiptsRequest(
                        group_id=GROUP, sequence=sequences[-1], filter=message_pb2.READ_RECEIPT_FILTER_UNREAD),
                        metadata=tokens[OWNER], timeout=10)
                    latencies.append((time.perf_counter() - start) * 1000)

            asker = threading.Thread(target=ask_receipts, daemon=True)
            asker.start()

            async def mark(aio_channel, index):
                user = readers[index % len(readers)]
                step = index // len(readers)
                await message_pb2_grpc.MessageServiceStub(aio_channel).MarkGroupRead(message_pb2.MarkGroupReadRequest(
                    group_id=GROUP, read_sequence=sequences[min(step, len(sequences) - 1)]), metadata=tokens[user])

            total = len(readers) * len(sequences)
            done, elapsed = asyncio.run(run_calls(server.address, mark, total, seconds=args.seconds))
            stop.set()
            asker.join(timeout=10)
            time.sleep(1.5)  # the last batch is due an interval after its first read
            stream.cancel()

            # Recall: the owner sends --recalls more messages, then withdraws them from 256 calls in
            # flight while the members go on marking the group read (one read per recall); each
            # recall is a write with its MESSAGE_RECALLED event to every member.
            to_recall = []

            async def send(aio_channel, index):
                response = await message_pb2_grpc.MessageServiceStub(aio_channel).SendGroupMessage(
                    message_pb2.SendGroupMessageRequest(group_id=GROUP, type="text", text=f"to recall {index}"),
                    metadata=tokens[OWNER])
                to_recall.append(response.message.sequence)

            asyncio.run(run_calls(server.address, send, args.recalls))
            recalls = [0]

            async def recall(aio_channel, index):
                if index % 2 == 0:
                    await message_pb2_grpc.MessageServiceStub(aio_channel).RecallGroupMessage(
                        message_pb2.RecallGroupMessageRequest(group_id=GROUP, sequence=to_recall[index // 2]),
                        metadata=tokens[OWNER])
                    recalls[0] += 1
                else:
                    user = readers[(index // 2) % len(readers)]
                    await message_pb2_grpc.MessageServiceStub(aio_channel).MarkGroupRead(
                        message_pb2.MarkGroupReadRequest(group_id=GROUP, read_sequence=to_recall[index // 2]),
                        metadata=tokens[user])

            recalled, recall_elapsed = asyncio.run(run_calls(server.address, recall, 2 * len(to_recall)))
            tombstones, token = 0, ""
            while True:
                history = messages.GetGroupMessages(message_pb2.GetGroupMessagesRequest(
                    group_id=GROUP, direction=message_pb2.HISTORY_DIRECTION_NEWER, anchor_sequence=min(to_recall) - 1,
                    page_size=100, page_token=token), metadata=tokens[OWNER], timeout=10)
                tombstones += sum(1 for message in history.messages if message.recalled)
                token = history.next_page_token
                if not token:
                    break
        latencies.sort()
        p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
        print(f"MarkGroupRead in a {args.members}-member Work group: {done:,} calls in {elapsed:.1f} s = "
              f"{done / elapsed:,.0f} calls/s")
        print(f"GetMessageReadReceipts (UNREAD, {args.members} members) meanwhile: {len(latencies):,} calls, "
              f"p50 {statistics.median(latencies):.2f} ms, p99 {p99:.2f} ms")
        print(f"MESSAGE_READ_RECEIPT events to the sender: {len(events)} for {done:,} reads "
              f"({reports[0]:,} message counts reported)")
        print(f"RecallGroupMessage with MarkGroupRead interleaved: {recalls[0]:,} recalls and "
              f"{recalled - recalls[0]:,} reads in {recall_elapsed:.2f} s = {recalled / recall_elapsed:,.0f} calls/s; "
              f"history shows {tombstones} of {len(to_recall)} messages recalled")
    finally:
        server.stop()
        shutil.rmtree(server.workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
