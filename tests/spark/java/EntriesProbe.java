package pylogq.spark.jvm;

import java.io.BufferedOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

/**
 * Reads segment-like files with {@link Entries} and prints what it finds, one JSON object a line,
 * for tests/spark/test_jvm_entries.py to compare with pylogq's Python decoder.
 *
 * <p>{@code EntriesProbe MANIFEST}: each manifest line is a case, tab-separated: name, file, start
 * offset, end offset, decompression bound. For each case the file is walked from byte 0 with
 * {@link Entries#frame} and every entry decoded; printed are {@code {"case", "entry", ...}} per
 * entry (its header as Entries reads it), {@code {"case", "offset", ...}} per record, and at the
 * end {@code {"case", "stop": byte}} (where frame found no whole entry), {@code {"case", "kind",
 * "error"}} (a CorruptRecordException: {@code kind} its {@link CorruptRecordException.Kind}'s name,
 * {@code error} its message) or {@code {"case", "crash"}} (anything else).
 *
 * <p>{@code EntriesProbe bench FILE ROUNDS}: decodes the whole file ROUNDS times into a sink that
 * only touches each record, and prints the best round's speed.
 */
public final class EntriesProbe {
    private EntriesProbe() {
    }

    public static void main(String[] args) throws IOException {
        if (args.length == 3 && args[0].equals("bench")) {
            bench(Path.of(args[1]), Integer.parseInt(args[2]));
            return;
        }
        PrintStream out = new PrintStream(new BufferedOutputStream(System.out, 1 << 16), false, StandardCharsets.UTF_8);
        List<String> lines = Files.readAllLines(Path.of(args[0]), StandardCharsets.UTF_8);
        for (String line : lines) {
            if (line.isEmpty()) {
                continue;
            }
            String[] f = line.split("\t");
            String name = quote(f[0]);
            try {
                byte[] data = Files.readAllBytes(Path.of(f[1]));
                runCase(out, name, data, Long.parseLong(f[2]), Long.parseLong(f[3]), Integer.parseInt(f[4]));
            } catch (CorruptRecordException e) {
                out.println("{\"case\":" + name + ",\"kind\":" + quote(e.kind().name()) + ",\"error\":"
                            + quote(e.getMessage()) + "}");
            } catch (Throwable e) {  // a bug: the test names it
                out.println("{\"case\":" + name + ",\"crash\":" + quote(e.toString()) + "}");
            }
        }
        out.flush();
    }

    private static void runCase(PrintStream out, String name, byte[] data, long start, long end, int max) {
        int pos = 0;
        while (true) {
            int size = Entries.frame(data, pos, data.length);
            if (size == 0) {
                out.println("{\"case\":" + name + ",\"stop\":" + pos + "}");
                return;
            }
            int magic = Entries.magic(data, pos);
            StringBuilder entry = new StringBuilder("{\"case\":").append(name)
                .append(",\"entry\":").append(pos).append(",\"size\":").append(size)
                .append(",\"magic\":").append(magic)
                .append(",\"base\":").append(Entries.baseOffset(data, pos))
                .append(",\"last\":").append(Entries.lastOffset(data, pos));
            if (magic == 2) {
                entry.append(",\"count\":").append(Entries.recordsCount(data, pos))
                    .append(",\"control\":").append(Entries.isControl(data, pos));
            }
            out.println(entry.append('}'));
            Entries.decode(data, pos, size, start, end, new Printer(out, name, data), max);
            pos += size;
        }
    }

    /** Prints each record as a JSON line, its headers read back from their encoding. */
    private static final class Printer implements RecordSink {
        private final PrintStream out;
        private final String name;
        private final byte[] data;

        Printer(PrintStream out, String name, byte[] data) {
            this.out = out;
            this.name = name;
            this.data = data;
        }

        @Override
        public void record(long offset, long timestamp, int timestampType, byte[] buf, int keyPos, int keyLen,
                           int valuePos, int valueLen, int headersPos, int headerCount) {
            StringBuilder s = new StringBuilder(128).append("{\"case\":").append(name)
                .append(",\"offset\":").append(offset).append(",\"timestamp\":").append(timestamp)
                .append(",\"timestampType\":").append(timestampType)
                .append(",\"shared\":").append(buf == data)
                .append(",\"key\":").append(hex(buf, keyPos, keyLen))
                .append(",\"value\":").append(hex(buf, valuePos, valueLen))
                .append(",\"headers\":[");
            int p = headersPos;
            for (int i = 0; i < headerCount; i++) {
                long v = Entries.varint(buf, p, buf.length);
                int n = (int) v;
                p = (int) (v >>> 32);
                s.append(i == 0 ? "[" : ",[").append(hex(buf, p, n));
                p += n;
                v = Entries.varint(buf, p, buf.length);
                n = (int) v;
                p = (int) (v >>> 32);
                s.append(',').append(hex(buf, p, n)).append(']');
                p += Math.max(n, 0);
            }
            out.println(s.append("]}"));
        }
    }

    private static final char[] DIGITS = "0123456789abcdef".toCharArray();

    private static String hex(byte[] buf, int pos, int len) {
        if (len < 0) {
            return "null";
        }
        char[] c = new char[2 * len + 2];
        c[0] = '"';
        for (int i = 0; i < len; i++) {
            c[1 + 2 * i] = DIGITS[(buf[pos + i] >> 4) & 15];
            c[2 + 2 * i] = DIGITS[buf[pos + i] & 15];
        }
        c[c.length - 1] = '"';
        return new String(c);
    }

    private static String quote(String s) {
        StringBuilder b = new StringBuilder(s.length() + 2).append('"');
        for (int i = 0; i < s.length(); i++) {
            char ch = s.charAt(i);
            if (ch == '"' || ch == '\\') {
                b.append('\\').append(ch);
            } else if (ch < 0x20) {
                b.append(String.format("\\u%04x", (int) ch));
            } else {
                b.append(ch);
            }
        }
        return b.append('"').toString();
    }

    /** Counts records and value bytes, as a reader filling columns would at least touch them. */
    private static final class Counter implements RecordSink {
        long records;
        long checksum;

        @Override
        public void record(long offset, long timestamp, int timestampType, byte[] buf, int keyPos, int keyLen,
                           int valuePos, int valueLen, int headersPos, int headerCount) {
            records++;
            checksum += offset + timestamp + valueLen + keyLen + headerCount;
        }
    }

    private static void bench(Path file, int rounds) throws IOException {
        byte[] data = Files.readAllBytes(file);
        long best = Long.MAX_VALUE;
        Counter counter = null;
        for (int r = 0; r < rounds; r++) {
            counter = new Counter();
            long t0 = System.nanoTime();
            int pos = 0;
            int size;
            while ((size = Entries.frame(data, pos, data.length)) > 0) {
                Entries.decode(data, pos, size, Long.MIN_VALUE, Long.MAX_VALUE, counter);
                pos += size;
            }
            best = Math.min(best, System.nanoTime() - t0);
        }
        double seconds = best / 1e9;
        System.out.printf("{\"bytes\":%d,\"records\":%d,\"seconds\":%.4f,\"mb_per_s\":%.0f,\"records_per_s\":%.0f,"
                          + "\"checksum\":%d}%n", data.length, counter.records, seconds, data.length / 1e6 / seconds,
                          counter.records / seconds, counter.checksum);
    }
}
