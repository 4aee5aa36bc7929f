"""Non-blocking callers for the bulkhead and rate-limiter tests: COUNT
asyncio connections opened at once to 127.0.0.1:PORT, each sending one
GET. Prints one line per call: the status code answered, or "refused"
when the connect failed with ECONNREFUSED (the shim's refusal).

Usage: python3 async_connects.py PORT COUNT
"""
import asyncio
import sys


async def call(port):
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        await writer.drain()
        print((await reader.readline()).split()[1].decode())
        writer.close()
    except ConnectionRefusedError:
        print("refused")


async def main(port, count):
    await asyncio.gather(*(call(port) for _ in range(count)))


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]), int(sys.argv[2])))
