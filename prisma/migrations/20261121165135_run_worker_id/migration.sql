-- AlterTable
ALTER TABLE "runs" ADD COLUMN     "worker_id" TEXT;
