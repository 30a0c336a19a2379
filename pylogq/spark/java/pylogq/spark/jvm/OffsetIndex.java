package pylogq.spark.jvm;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Paths;
import java.util.Arrays;

/**
 * A segment's offset index, its trustworthy entries only: the JVM twin of
 * {@code pylogq.storage.index_file.read_offset_index}; and the one lookup the reader makes in a time index ({@link #firstOffsetFrom}).
 *
 * <p>Read with plain reads (never mapped: the broker may trim the file under us). The active
 * segment's index is preallocated and zero past its entries, and after a crash any index may
 * be stale, so entries count only while offsets strictly increase, positions never go back (the
 * rules of the broker's own index sanity check) and positions lie inside the log file as sized by the caller. An entry {@code (offset, position)} says the
 * batch at {@code position} ends with {@code offset}.
 */
final class OffsetIndex {
    static final OffsetIndex EMPTY = new OffsetIndex(new long[0], new long[0], 0);

    final long[] offsets;
    final long[] positions;
    final int size;

    private OffsetIndex(long[] offsets, long[] positions, int size) {
        this.offsets = offsets;
        this.positions = positions;
        this.size = size;
    }

    /** The index of the last entry whose offset is at or below {@code target} (-1: none). */
    int floor(long target) {
        int i = Arrays.binarySearch(offsets, 0, size, target);
        return i >= 0 ? i : -i - 2;
    }

    /** The index of the first entry whose offset is at or above {@code target} ({@link #size}: none). */
    int ceiling(long target) {
        int i = Arrays.binarySearch(offsets, 0, size, target);
        return i >= 0 ? i : -i - 1;
    }

    /** The index file beside a segment's log file: {@code .index} or {@code .timeindex}, with its {@code .swap}. */
    private static String beside(SegmentWalk.Segment segment, String suffix) {
        String path = segment.path;
        int cut = path.lastIndexOf(".log");
        return path.substring(0, cut) + suffix + path.substring(cut + 4);
    }

    static OffsetIndex read(SegmentWalk.Segment segment, long logSize) {
        byte[] raw = entries(beside(segment, ".index"), 8);
        int n = raw.length / 8;
        if (n == 0) {
            return EMPTY;
        }
        long[] offsets = new long[n];
        long[] positions = new long[n];
        int kept = 0;
        int lastRel = 0;
        int lastPos = 0;
        for (int i = 0; i < n; i++) {
            int rel = readInt(raw, 8 * i);
            int pos = readInt(raw, 8 * i + 4);
            if (i == 0 ? rel < 0 || pos < 0 : rel <= lastRel || pos < lastPos) {
                break;
            }
            if (pos >= logSize) {
                break;  // positions past the sized file do not count
            }
            offsets[kept] = segment.base + rel;
            positions[kept] = pos;
            kept++;
            lastRel = rel;
            lastPos = pos;
        }
        return new OffsetIndex(offsets, positions, kept);
    }

    /**
     * The first offset of a segment that can hold a record at or after {@code timestamp}, by its
     * time index (Long.MIN_VALUE when the index says nothing: not the segment's base, as a v0/v1
     * wrapper's records may lie below it): one past the offset of the last trustworthy entry
     * whose timestamp is below it. An entry {@code (timestamp, offset)}
     * says every record of the segment at or below {@code offset} has a timestamp at or below
     * {@code timestamp}. Entries count while timestamps increase and offsets do not go back (the
     * active segment's file is preallocated and zero past them), as
     * {@code pylogq.storage.index_file.read_time_index} counts them.
     */
    static long firstOffsetFrom(SegmentWalk.Segment segment, long timestamp) {
        byte[] raw = entries(beside(segment, ".timeindex"), 12);
        int n = raw.length / 12;
        long from = Long.MIN_VALUE;
        long lastTs = Long.MIN_VALUE;
        int lastRel = 0;
        for (int i = 0; i < n; i++) {
            long ts = readLong(raw, 12 * i);
            int rel = readInt(raw, 12 * i + 8);
            if (i == 0 ? rel < 0 : ts <= lastTs || rel < lastRel) {
                break;
            }
            if (ts >= timestamp) {
                break;
            }
            from = segment.base + rel + 1;
            lastTs = ts;
            lastRel = rel;
        }
        return from;
    }

    private static long readLong(byte[] b, int at) {
        return ((long) readInt(b, at) << 32) | (readInt(b, at + 4) & 0xffffffffL);
    }

    private static int readInt(byte[] b, int at) {
        return ((b[at] & 0xff) << 24) | ((b[at + 1] & 0xff) << 16) | ((b[at + 2] & 0xff) << 8) | (b[at + 3] & 0xff);
    }

    /**
     * The entries of an index file up to its zero-filled tail (none when it cannot be read):
     * reading stops at the first all-zero entry after the first, in reads that double from
     * 64 KiB, so a read costs about what the entries take.
     */
    private static byte[] entries(String path, int entrySize) {
        try (InputStream in = Files.newInputStream(Paths.get(path))) {
            byte[] out = new byte[0];
            int want = 64 * 1024 / entrySize * entrySize;
            boolean first = true;
            while (true) {
                byte[] piece = in.readNBytes(want);
                int whole = piece.length / entrySize * entrySize;
                if (whole == 0) {
                    return out;
                }
                int zero = -1;
                for (int e = first ? 1 : 0; e < whole / entrySize; e++) {
                    boolean allZero = true;
                    for (int b = entrySize * e; b < entrySize * e + entrySize; b++) {
                        if (piece[b] != 0) {
                            allZero = false;
                            break;
                        }
                    }
                    if (allZero) {
                        zero = e;
                        break;
                    }
                }
                int keep = zero >= 0 ? zero * entrySize : whole;
                byte[] joined = Arrays.copyOf(out, out.length + keep);
                System.arraycopy(piece, 0, joined, out.length, keep);
                out = joined;
                if (zero >= 0 || piece.length < want) {
                    return out;
                }
                first = false;
                want = Math.min(want * 2, (16 << 20) / entrySize * entrySize);
            }
        } catch (NoSuchFileException e) {
            return new byte[0];
        } catch (IOException e) {
            return new byte[0];  // (as the Python reader: an index that cannot be read is no index)
        }
    }
}
